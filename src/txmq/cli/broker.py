"""``txmq broker`` and ``txmq namesrv``: run a broker (gRPC, remoting, name server) in the foreground."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from txmq.cli.common import duration_ms, fail


def register(app: typer.Typer) -> None:
    app.command("broker", help="Run a broker in the foreground (Ctrl-C or SIGTERM stops it cleanly).")(broker)
    app.command("namesrv", help="Run a stand-alone name server for several brokers.")(namesrv)


def broker(
    data_dir: Annotated[
        str, typer.Option("--data-dir", help="where the store and metadata live")
    ] = "./txmq-data",
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="gRPC port (RocketMQ 5 clients)")] = 8081,
    remoting_port: Annotated[int, typer.Option("--remoting-port", help="remoting (TCP) port")] = 10911,
    namesrv_port: Annotated[int, typer.Option("--namesrv-port", help="embedded name server port")] = 9876,
    namesrv_addr: Annotated[
        str | None,
        typer.Option("--namesrv-addr", help="register with this name server instead of embedding one"),
    ] = None,
    broker_name: Annotated[str, typer.Option("--broker-name")] = "broker-a",
    flush: Annotated[
        str, typer.Option(help="sync: ack after fsync (group commit); async: periodic flush")
    ] = "sync",
    flush_interval: Annotated[str, typer.Option("--flush-interval")] = "500ms",
    segment_size: Annotated[int, typer.Option("--segment-size", help="CommitLog segment bytes")] = 1024
    * 1024
    * 1024,
    transaction_timeout: Annotated[str, typer.Option("--transaction-timeout")] = "6s",
    transaction_check_interval: Annotated[str, typer.Option("--transaction-check-interval")] = "30s",
    transaction_check_max: Annotated[int, typer.Option("--transaction-check-max")] = 15,
    delay_levels: Annotated[str | None, typer.Option("--delay-levels")] = None,
    delay_max: Annotated[str, typer.Option("--delay-max", help="longest delivery delay accepted")] = "3d",
    default_queues: Annotated[int, typer.Option("--default-queues")] = 4,
    max_delivery_attempts: Annotated[int, typer.Option("--max-delivery-attempts")] = 17,
    no_auto_create_topics: Annotated[bool, typer.Option("--no-auto-create-topics")] = False,
    grpc_tls: Annotated[
        str | None,
        typer.Option(
            "--grpc-tls",
            help="TLS on the gRPC port: permissive (TLS and plaintext clients on the one port; the "
            "default), on (TLS only) or off (plaintext only)",
        ),
    ] = None,
    tls_cert: Annotated[
        str | None,
        typer.Option("--tls-cert", help="PEM certificate (default: a self-signed one kept in DIR/tls)"),
    ] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key", help="PEM private key of --tls-cert")] = None,
    config: Annotated[str | None, typer.Option("--config", help="JSON file of settings")] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "WARNING",
) -> None:
    from txmq.broker.config import DEFAULT_DELAY_LEVELS, BrokerConfig, load_config_file
    from txmq.common import errors
    from txmq.server.runtime import run
    from txmq.storage.api import FlushMode

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if flush not in ("sync", "async"):
        fail("--flush must be sync or async")
    base = BrokerConfig(**load_config_file(config)) if config else BrokerConfig()
    try:
        settings = base.with_overrides(
            data_dir=data_dir,
            host=host,
            grpc_port=port,
            remoting_port=remoting_port,
            namesrv_port=namesrv_port,
            namesrv_addr=namesrv_addr,
            run_namesrv=namesrv_addr is None,
            broker_name=broker_name,
            flush=FlushMode(flush),
            flush_interval_ms=duration_ms(flush_interval, "--flush-interval"),
            segment_bytes=segment_size,
            transaction_timeout_ms=duration_ms(transaction_timeout, "--transaction-timeout"),
            transaction_check_interval_ms=duration_ms(
                transaction_check_interval, "--transaction-check-interval"
            ),
            transaction_check_max=transaction_check_max,
            delay_levels=delay_levels or base.delay_levels or DEFAULT_DELAY_LEVELS,
            delay_ms_max=duration_ms(delay_max, "--delay-max"),
            default_queues=default_queues,
            max_delivery_attempts=max_delivery_attempts,
            auto_create_topics=not no_auto_create_topics,
            grpc_tls=grpc_tls,
            tls_cert_file=tls_cert,
            tls_key_file=tls_key,
        ).validate()
        run(settings)
    except errors.TxmqError as exc:
        fail(exc.message)
    except OSError as exc:
        fail(f"cannot start the broker: {exc}")


def namesrv(
    port: Annotated[int, typer.Option(help="name server port")] = 9876,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
) -> None:
    try:
        from txmq.server.namesrv import run_standalone
    except ModuleNotFoundError:
        fail("the name server is not available in this build")
    run_standalone(host, port)
