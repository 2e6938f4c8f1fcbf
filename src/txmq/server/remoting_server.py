"""Start the broker's remoting front door, its embedded name server, and its registration with an
external name server. ``serve_all`` is what ``txmq broker`` calls (``server/runtime.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common import errors
from txmq.protocol.remoting.bodies import RegisterBrokerBody
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.headers import RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader
from txmq.server.namesrv import NAMESRV_CODES, LocalBroker, NameServer, serve_namesrv
from txmq.server.remoting.admin import topic_table
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint, RemotingServer, connect, serve

log = logging.getLogger(__name__)

Closer = Callable[[], Awaitable[None]]
REGISTER_INTERVAL_S = 30.0
_TOPIC_POLL_S = 1.0


def advertised_host(host: str) -> str:
    """The IPv4 address clients should dial (routes must carry a concrete address, not 0.0.0.0)."""
    if host in ("", "0.0.0.0", "::"):
        with contextlib.suppress(OSError):
            return socket.gethostbyname(socket.gethostname())
        return "127.0.0.1"
    if host == "localhost":
        return "127.0.0.1"
    return host


async def serve_remoting(
    broker: Broker,
    host: str,
    port: int,
    *,
    advertised_addr: str | None = None,
    connections_max: int | None = None,
) -> tuple[RemotingServer, RemotingContext]:
    """The broker's remoting door on ``host:port``; it also answers name-server codes for this broker.
    Routes name ``advertised_addr`` when given (clients behind a NAT or a proxy), else the bound port."""
    ctx = RemotingContext(broker, "")
    namesrv = NameServer(local=LocalBroker(broker, ""))

    async def fallback(request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        return await namesrv.handle(request, endpoint)

    server = await serve(host, port, make_handler(ctx, fallback), connections_max=connections_max)
    ctx.advertised_addr = advertised_addr or f"{advertised_host(host)}:{server.port}"
    namesrv.set_local(LocalBroker(broker, ctx.advertised_addr))
    return server, ctx


async def serve_all(
    broker: Broker, config: BrokerConfig, ports: dict[str, int] | None = None
) -> list[Closer]:
    """Start the remoting door, the embedded name server (``run_namesrv``) and the registration loop
    (``namesrv_addr``); returns the closers, to be awaited in reverse order at shutdown. ``ports`` gets
    the bound ``remoting`` and ``namesrv`` ports."""
    closers: list[Closer] = []
    bound = {} if ports is None else ports
    server, ctx = await serve_remoting(
        broker, config.host, config.remoting_port, advertised_addr=config.remoting_advertised_addr,
        connections_max=config.connections_max,
    )  # fmt: skip
    closers.append(server.close)
    bound["remoting"] = server.port
    try:
        if config.run_namesrv:
            namesrv = await serve_namesrv(
                config.host, config.namesrv_port, NameServer(local=LocalBroker(broker, ctx.advertised_addr))
            )
            closers.append(namesrv.close)
            bound["namesrv"] = namesrv.port
        if config.namesrv_addr:
            registrar = Registrar(broker, ctx.advertised_addr, config.namesrv_addr)
            await registrar.register_once()
            task = asyncio.get_running_loop().create_task(registrar.run())
            closers.append(lambda: registrar.stop(task))
    except BaseException:
        for close in reversed(closers):
            await close()
        raise
    return closers


class Registrar:
    """Registers the broker (and its topic table) with external name servers: at start, every 30 s,
    and soon after the topic set changes."""

    def __init__(self, broker: Broker, broker_addr: str, namesrv_addr: str) -> None:
        self._broker = broker
        self._broker_addr = broker_addr
        self._targets = [a.strip() for a in namesrv_addr.replace(",", ";").split(";") if a.strip()]
        self._endpoints: dict[str, RemotingEndpoint] = {}
        self._stopping = asyncio.Event()

    def _header(self) -> RegisterBrokerRequestHeader:
        config = self._broker.config
        return RegisterBrokerRequestHeader(
            broker_name=config.broker_name, broker_addr=self._broker_addr, cluster_name=config.cluster_name,
            ha_server_addr="", broker_id=0, heartbeat_timeout_millis=120_000,
        )  # fmt: skip

    async def _endpoint(self, target: str) -> RemotingEndpoint:
        endpoint = self._endpoints.get(target)
        if endpoint is None or not endpoint.is_open():
            host, _, port = target.rpartition(":")
            endpoint = await connect(host, int(port))
            self._endpoints[target] = endpoint
        return endpoint

    async def register_once(self) -> None:
        table = topic_table(self._broker.topics.list(), default_queues=self._broker.config.default_queues)
        body = RegisterBrokerBody(table).to_json()
        for target in self._targets:
            try:
                endpoint = await self._endpoint(target)
                reply = await endpoint.request(
                    RequestCode.REGISTER_BROKER, self._header().to_ext_fields(), body
                )
                if reply.code != ResponseCode.SUCCESS:
                    log.warning("name server %s refused the registration: %s", target, reply.remark)
            except (errors.TxmqError, ValueError) as exc:
                log.warning("cannot register with name server %s: %s", target, exc)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        known = len(self._broker.topics.list())
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), _TOPIC_POLL_S)
            count = len(self._broker.topics.list())
            if count != known or loop.time() - last >= REGISTER_INTERVAL_S:
                known, last = count, loop.time()
                await self.register_once()

    async def stop(self, task: asyncio.Task[None]) -> None:
        self._stopping.set()
        await task
        config = self._broker.config
        header = UnregisterBrokerRequestHeader(config.broker_name, self._broker_addr, config.cluster_name, 0)
        for endpoint in self._endpoints.values():
            with contextlib.suppress(errors.TxmqError):
                await endpoint.request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields(), timeout=1.0)
            await endpoint.close()


__all__ = ["NAMESRV_CODES", "Registrar", "serve_all", "serve_remoting"]
