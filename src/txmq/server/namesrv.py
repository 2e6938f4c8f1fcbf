"""The name server: which broker serves which topic, for clients configured with a name-server address.

Two sources of routes, in this order:

* an embedded name server (inside ``txmq broker``) asks its ``Broker`` directly, so a topic a client asks
  for is auto-created exactly when the broker would create it on send;
* brokers that register (REGISTER_BROKER, every 30 s) with their topic table; a broker not heard from
  for two minutes is dropped.

Codes: 103 REGISTER_BROKER, 104 UNREGISTER_BROKER, 105 GET_ROUTEINFO_BY_TOPIC (17 for unknown topics),
106 GET_BROKER_CLUSTER_INFO, 206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER, 101 GET_KV_CONFIG (always 22).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import zlib
from dataclasses import dataclass, field

from txmq.broker.broker import Broker
from txmq.common import errors, names
from txmq.common.clock import Clock, SystemClock
from txmq.protocol.remoting.bodies import (
    BrokerData,
    ClusterInfo,
    QueueData,
    RegisterBrokerBody,
    TopicConfigData,
    TopicList,
    TopicRouteData,
)
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.headers import (
    GetRouteInfoRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from txmq.server.remoting_transport import RemotingEndpoint, RemotingServer, serve

log = logging.getLogger(__name__)

BROKER_EXPIRY_MS = 120_000


@dataclass(slots=True)
class LocalBroker:
    """The broker an embedded name server answers for, without registration."""

    broker: Broker
    addr: str  # "ip:remotingPort"


@dataclass(slots=True)
class Registration:
    cluster: str
    broker_name: str
    addrs: dict[int, str]
    topics: dict[str, TopicConfigData] = field(default_factory=dict)
    last_seen_ms: int = 0


class NameServer:
    def __init__(self, *, local: LocalBroker | None = None, clock: Clock | None = None) -> None:
        self._local = local
        self._clock = clock or (local.broker.clock if local else SystemClock())
        self._brokers: dict[str, Registration] = {}

    def set_local(self, local: LocalBroker) -> None:
        self._local = local

    # ---- registrations ------------------------------------------------------------------------
    def register(self, header: RegisterBrokerRequestHeader, body: bytes) -> None:
        raw = zlib.decompress(body) if header.compressed and body else body
        topics = RegisterBrokerBody.from_json(raw).topics.topic_config_table if raw else {}
        entry = self._brokers.get(header.broker_name)
        if entry is None or entry.cluster != header.cluster_name:
            entry = Registration(header.cluster_name, header.broker_name, {})
            self._brokers[header.broker_name] = entry
        entry.addrs[header.broker_id] = header.broker_addr
        entry.topics = dict(topics)
        entry.last_seen_ms = self._clock.now_ms()

    def unregister(self, header: UnregisterBrokerRequestHeader) -> None:
        entry = self._brokers.get(header.broker_name)
        if entry is not None:
            entry.addrs.pop(header.broker_id, None)
            if not entry.addrs:
                del self._brokers[header.broker_name]

    def _live(self) -> list[Registration]:
        now = self._clock.now_ms()
        for name in [n for n, r in self._brokers.items() if now - r.last_seen_ms >= BROKER_EXPIRY_MS]:
            log.info("broker %s expired from the name server", name)
            del self._brokers[name]
        return list(self._brokers.values())

    # ---- queries ------------------------------------------------------------------------------
    def route(self, topic: str) -> TopicRouteData | None:
        brokers: list[BrokerData] = []
        queues: list[QueueData] = []
        local = self._local_topic(topic)
        if local is not None and self._local is not None:
            config = self._local.broker.config
            brokers.append(BrokerData(config.cluster_name, config.broker_name, {0: self._local.addr}))
            queues.append(
                QueueData(config.broker_name, local.read_queue_nums, local.write_queue_nums, local.perm)
            )
        for entry in self._live():
            found = entry.topics.get(topic)
            if found is not None and all(b.broker_name != entry.broker_name for b in brokers):
                brokers.append(BrokerData(entry.cluster, entry.broker_name, dict(entry.addrs)))
                queues.append(
                    QueueData(entry.broker_name, found.read_queue_nums, found.write_queue_nums, found.perm)
                )
        return TopicRouteData(brokers, queues) if brokers else None

    def _local_topic(self, topic: str) -> TopicConfigData | None:
        if self._local is None:
            return None
        broker = self._local.broker
        if topic == names.DEFAULT_TOPIC:
            queues = broker.config.default_queues
            return TopicConfigData(topic, queues, queues)
        try:
            config = broker.route(topic)
        except errors.TxmqError:
            return None
        if config.system:
            return None
        return TopicConfigData(topic, config.queues, config.queues, int(config.perm))

    def cluster_info(self) -> ClusterInfo:
        table: dict[str, BrokerData] = {}
        clusters: dict[str, list[str]] = {}
        if self._local is not None:
            config = self._local.broker.config
            table[config.broker_name] = BrokerData(
                config.cluster_name, config.broker_name, {0: self._local.addr}
            )
            clusters.setdefault(config.cluster_name, []).append(config.broker_name)
        for entry in self._live():
            if entry.broker_name not in table:
                table[entry.broker_name] = BrokerData(entry.cluster, entry.broker_name, dict(entry.addrs))
                clusters.setdefault(entry.cluster, []).append(entry.broker_name)
        return ClusterInfo(table, clusters)

    def topics(self) -> list[str]:
        found: set[str] = set()
        if self._local is not None:
            found |= {t.name for t in self._local.broker.topics.list()}
        for entry in self._live():
            found |= set(entry.topics)
        return sorted(found)

    # ---- the remoting handler -----------------------------------------------------------------
    async def handle(
        self, request: RemotingCommand, _: RemotingEndpoint | None = None
    ) -> RemotingCommand | None:
        try:
            return self._answer(request)
        except errors.TxmqError as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR, exc.message)

    def _answer(self, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = GetRouteInfoRequestHeader.from_command(request).topic
            route = self.route(topic)
            if route is None:
                return make_response(
                    request,
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"No topic route info in name server for the topic: {topic}",
                )
            return make_response(request, body=route.to_json())
        if code == RequestCode.REGISTER_BROKER:
            self.register(RegisterBrokerRequestHeader.from_command(request), request.body)
            return make_response(request, ext_fields=RegisterBrokerResponseHeader().to_ext_fields())
        if code == RequestCode.UNREGISTER_BROKER:
            self.unregister(UnregisterBrokerRequestHeader.from_command(request))
            return make_response(request)
        if code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return make_response(request, body=self.cluster_info().to_json())
        if code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            return make_response(request, body=TopicList(self.topics()).to_json())
        if code == RequestCode.GET_KV_CONFIG:
            return make_response(request, ResponseCode.QUERY_NOT_FOUND, "no such configuration")
        return make_response(
            request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {code} is not supported"
        )


NAMESRV_CODES = frozenset(
    {
        RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER,
        RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.GET_KV_CONFIG,
    }
)  # fmt: skip


async def serve_namesrv(host: str, port: int, namesrv: NameServer) -> RemotingServer:
    return await serve(host, port, namesrv.handle)


async def _run(host: str, port: int) -> None:
    server = await serve_namesrv(host, port, NameServer())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    print(f"txmq namesrv ready on {host}:{server.port}", flush=True)
    await stop.wait()
    await server.close()
    print("txmq namesrv stopped", flush=True)


def run_standalone(host: str, port: int) -> None:
    """``txmq namesrv``: serve routes for registering brokers until SIGTERM/SIGINT."""
    asyncio.run(_run(host, port))
