"""Run a broker: open the store, start the front doors (gRPC, remoting, name server), run background
services, stop cleanly on SIGTERM/SIGINT.

The "ready" line is printed only once every front door accepts connections; scripts and tests wait
for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import os
import secrets
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig

log = logging.getLogger(__name__)

Closer = Callable[[], Awaitable[None]]


@dataclass
class RunningBroker:
    broker: Broker
    closers: list[Closer] = field(default_factory=list)
    # the ports the front doors listen on ("grpc", "remoting", "namesrv"), as bound: a port given as 0
    # is the one the system picked
    ports: dict[str, int] = field(default_factory=dict)

    async def stop(self) -> None:
        for close in reversed(self.closers):
            try:
                await close()
            except Exception:
                log.exception("error while stopping a front door")
        await self.broker.close()


async def start_broker(config: BrokerConfig) -> RunningBroker:
    """Open the broker and start every front door; returns once they all accept connections."""
    broker = await Broker.open(config)
    running = RunningBroker(broker)
    try:
        await _start_grpc(running, config)
        await _start_remoting(running, config)
    except BaseException:
        await running.stop()
        raise
    broker.start_background()
    return running


async def _start_grpc(running: RunningBroker, config: BrokerConfig) -> None:
    """The gRPC door with its TLS mode: plaintext only, TLS only (grpc's own TLS on the port), or both
    on one port (a ``GrpcFront`` on the public port relaying to a plaintext and a TLS backend, abstract Unix
    sockets)."""
    import grpc

    from txmq.broker.config import TlsMode
    from txmq.server.grpc_front import BACKEND_HOST, GrpcFront
    from txmq.server.grpc_server import routed_host
    from txmq.server.grpc_server import serve as serve_grpc
    from txmq.server.tls import load_key_pair

    mode = TlsMode.parse(config.grpc_tls)
    credentials = None
    if mode is not TlsMode.OFF:
        pair = load_key_pair(config.tls_cert_file, config.tls_key_file, config.data_path, config.host)
        credentials = grpc.ssl_server_credentials([(pair.private_key_pem, pair.certificate_pem)])
    front = None
    if mode is TlsMode.PERMISSIVE:
        front = await GrpcFront.bind(config.host, config.grpc_port, connections_max=config.connections_max)
        backend_name = f"txmq-grpc-{os.getpid()}-{secrets.token_hex(6)}"  # abstract Unix sockets
        try:
            server = await serve_grpc(
                running.broker,
                BACKEND_HOST,
                0,
                advertised_host=routed_host(config.host),
                advertised_port=front.port,
                tls=credentials,
                backend_name=backend_name,
            )
        except BaseException:
            await front.close()
            raise
    else:
        server = await serve_grpc(
            running.broker, config.host, config.grpc_port, tls=credentials, plaintext=mode is TlsMode.OFF
        )

    async def stop_grpc() -> None:
        if front is not None:
            await front.close()  # no new connections first
        await server.stop(grace=1.0)
        if front is not None:
            front.close_relays()  # the pumped connections the backends' stop did not end

    running.closers.append(stop_grpc)
    running.ports["grpc"] = front.port if front is not None else server.txmq_port
    if front is not None:
        await front.route(*server.txmq_backends)


async def _start_remoting(running: RunningBroker, config: BrokerConfig) -> None:
    try:  # `from txmq.server import remoting_server` raises a plain ImportError when it is absent
        remoting_server = importlib.import_module("txmq.server.remoting_server")
    except ModuleNotFoundError as exc:
        if exc.name != "txmq.server.remoting_server":
            raise
        return
    closers = await remoting_server.serve_all(running.broker, config, running.ports)
    running.closers.extend(closers)


# the young generation's collection threshold in a broker process (CPython's default is 700)
GC_YOUNG_THRESHOLD = 50_000


def tune_gc() -> None:
    """The collector settings of a broker process, applied once the broker is open.

    Every request allocates and frees a few dozen container objects (frames' dicts, tuples, futures),
    nearly all freed by reference counting; with CPython's defaults a young collection ran every 700
    net allocations and every few dozen of those an older one, whose walk over every long-lived object
    (modules, the key index's dict, the topic and queue tables) grew with the store: about a tenth of
    the broker's CPU per message on the remoting send path. So what the process holds at start-up is
    frozen (``gc.freeze``: never walked again; it lives as long as the process anyway), and the young
    generation is collected every ``GC_YOUNG_THRESHOLD`` net allocations. Cycles are still collected:
    the garbage a cycle can hold between collections stays bounded by the threshold."""
    gc.collect()  # what start-up left as garbage goes now, not into the frozen set
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), middle, old)


async def run_until_signalled(config: BrokerConfig) -> None:
    running = await start_broker(config)
    tune_gc()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    ports = running.ports
    log.info("remoting on port %s, name server on port %s", ports.get("remoting"), ports.get("namesrv"))
    print(f"txmq broker ready on {config.host}:{ports.get('grpc', config.grpc_port)}", flush=True)
    report = running.broker.store.recovery_report
    if report is not None and report.truncated_bytes:
        print(
            f"recovery cut a torn tail at offset {report.truncated_at}: {report.truncated_records} "
            f"record(s), {report.truncated_bytes} bytes of file including preallocated zeros "
            f"({report.reason})",
            file=sys.stderr,
            flush=True,
        )
    elif report is not None and report.reason:  # nothing to cut, yet records are missing
        print(f"recovery: {report.reason}", file=sys.stderr, flush=True)
    await stop.wait()
    await running.stop()
    print("txmq broker stopped", flush=True)


def install_uvloop() -> None:
    """Make uvloop the event loop policy when it is installed (the broker's loop; benchmarks use it too)."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass


def run(config: BrokerConfig) -> None:
    install_uvloop()
    asyncio.run(run_until_signalled(config))
