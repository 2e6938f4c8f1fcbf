"""``txmq broker`` and ``txmq namesrv``: run a broker (gRPC, remoting, name server) in the foreground."""

from __future__ import annotations

import logging
from typing import Annotated, TypeVar

import typer

from txmq.cli.common import duration_ms, fail

T = TypeVar("T")


def register(app: typer.Typer) -> None:
    app.command("broker", help="Run a broker in the foreground (Ctrl-C or SIGTERM stops it cleanly).")(broker)
    app.command("namesrv", help="Run a stand-alone name server for several brokers.")(namesrv)


def broker(
    ctx: typer.Context,
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
    prealloc: Annotated[
        int | None,
        typer.Option(
            "--prealloc-bytes",
            help="sync flush: CommitLog bytes zero-filled and fsynced ahead of appends, so an fsync "
            "journals no file growth (default 1 MiB; 0: off)",
        ),
    ] = None,
    transaction_timeout: Annotated[str, typer.Option("--transaction-timeout")] = "6s",
    transaction_check_interval: Annotated[str, typer.Option("--transaction-check-interval")] = "30s",
    transaction_check_max: Annotated[int, typer.Option("--transaction-check-max")] = 15,
    delay_levels: Annotated[str | None, typer.Option("--delay-levels")] = None,
    delay_max: Annotated[str, typer.Option("--delay-max", help="longest delivery delay accepted")] = "3d",
    default_queues: Annotated[int, typer.Option("--default-queues")] = 4,
    max_delivery_attempts: Annotated[int, typer.Option("--max-delivery-attempts")] = 17,
    no_auto_create_topics: Annotated[bool, typer.Option("--no-auto-create-topics")] = False,
    receive_invisible_min: Annotated[
        str,
        typer.Option(
            "--receive-invisible-min",
            help="shortest invisible duration a ReceiveMessage may ask (Apache's proxy: 10s)",
        ),
    ] = "10s",
    invisible_max: Annotated[
        str, typer.Option("--invisible-max", help="longest invisible duration (receive and change; 12h)")
    ] = "12h",
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
    try:
        base = BrokerConfig(**load_config_file(config)) if config else BrokerConfig()
    except errors.TxmqError as exc:  # a missing, malformed or mistyped file: one line, no traceback
        fail(exc.message)

    def given(param: str) -> bool:
        """An option's value counts over the config file's only when it was given on the command line
        (without a file the defaults are the same either way)."""
        source = ctx.get_parameter_source(param)  # click's ParameterSource (typer may vendor click)
        return config is None or (source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"))

    def pick(param: str, value: T) -> T | None:
        return value if given(param) else None

    def pick_ms(param: str, text: str) -> int | None:
        return duration_ms(text, "--" + param.replace("_", "-")) if given(param) else None

    try:
        settings = base.with_overrides(
            data_dir=pick("data_dir", data_dir),
            host=pick("host", host),
            grpc_port=pick("port", port),
            remoting_port=pick("remoting_port", remoting_port),
            namesrv_port=pick("namesrv_port", namesrv_port),
            namesrv_addr=pick("namesrv_addr", namesrv_addr),
            broker_name=pick("broker_name", broker_name),
            flush=FlushMode(flush) if given("flush") else None,
            flush_interval_ms=pick_ms("flush_interval", flush_interval),
            segment_bytes=pick("segment_size", segment_size),
            prealloc_bytes=prealloc,
            transaction_timeout_ms=pick_ms("transaction_timeout", transaction_timeout),
            transaction_check_interval_ms=pick_ms("transaction_check_interval", transaction_check_interval),
            transaction_check_max=pick("transaction_check_max", transaction_check_max),
            delay_levels=delay_levels or base.delay_levels or DEFAULT_DELAY_LEVELS,
            delay_ms_max=pick_ms("delay_max", delay_max),
            default_queues=pick("default_queues", default_queues),
            max_delivery_attempts=pick("max_delivery_attempts", max_delivery_attempts),
            auto_create_topics=False if no_auto_create_topics else None,
            receive_invisible_ms_min=pick_ms("receive_invisible_min", receive_invisible_min),
            invisible_ms_max=pick_ms("invisible_max", invisible_max),
            grpc_tls=grpc_tls,
            tls_cert_file=tls_cert,
            tls_key_file=tls_key,
        )
        # an external name server, from either source, replaces the embedded one
        settings = settings.with_overrides(run_namesrv=settings.run_namesrv and settings.namesrv_addr is None)
        run(settings.validate())
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
    if not 0 <= port <= 65535:
        fail(f"port {port} is out of range")
    try:
        run_standalone(host, port)
    except OSError as exc:  # a port taken, an address not ours: one line, as `txmq broker` says it
        fail(f"cannot start the name server: {exc}")
