"""Connected clients: who they are, which groups/topics they produce or consume, and the channel the
broker uses to call them back (transaction check-back). Transport-neutral: the gRPC Telemetry stream and a
remoting connection both implement :class:`ClientChannel`."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol

from txmq.common.clock import Clock
from txmq.common.message import MessageView


class ClientKind(enum.Enum):
    PRODUCER = "producer"
    PUSH_CONSUMER = "push_consumer"
    SIMPLE_CONSUMER = "simple_consumer"
    PULL_CONSUMER = "pull_consumer"
    OTHER = "other"


class ClientChannel(Protocol):
    """The broker's way to reach one client. ``send_check`` returns True only when the command was
    handed to a live connection (a check that could not be written is not counted)."""

    def send_check(self, message: MessageView, transaction_id: str) -> bool: ...

    def is_open(self) -> bool: ...


@dataclass(slots=True)
class ClientInfo:
    client_id: str
    kind: ClientKind = ClientKind.OTHER
    groups: set[str] = field(default_factory=set)  # producer groups / topics (5.x) or consumer groups
    topics: set[str] = field(default_factory=set)
    channel: ClientChannel | None = None
    last_seen_ms: int = 0
    protocol: str = "grpc"
    detached_ms: int | None = None  # when its channel closed, until a channel is attached again


class ClientRegistry:
    """Liveness by heartbeat: a client is live while its channel is open or it was seen recently."""

    def __init__(self, clock: Clock, *, expiry_ms: int = 120_000) -> None:
        self._clock = clock
        self._expiry_ms = expiry_ms
        self._clients: dict[str, ClientInfo] = {}

    def touch(
        self,
        client_id: str,
        *,
        kind: ClientKind | None = None,
        groups: set[str] | None = None,
        topics: set[str] | None = None,
        channel: ClientChannel | None = None,
        protocol: str | None = None,
    ) -> ClientInfo:
        info = self._clients.get(client_id)
        if info is None:
            info = ClientInfo(client_id=client_id)
            self._clients[client_id] = info
        if kind is not None:
            info.kind = kind
        if groups:
            info.groups |= groups
        if topics:
            info.topics |= topics
        if channel is not None:
            info.channel = channel
            info.detached_ms = None
        if protocol is not None:
            info.protocol = protocol
        info.last_seen_ms = self._clock.now_ms()
        return info

    def get(self, client_id: str) -> ClientInfo | None:
        return self._clients.get(client_id)

    def remove(self, client_id: str) -> None:
        self._clients.pop(client_id, None)

    def detach_channel(self, client_id: str, channel: ClientChannel) -> None:
        info = self._clients.get(client_id)
        if info is not None and info.channel is channel:
            info.channel = None
            info.detached_ms = self._clock.now_ms()

    def departed(self, client_id: str, grace_ms: int) -> str | None:
        """Why ``client_id`` counts as gone, or None while it may still come back: unknown (it ended
        its session, or expired), silent past the expiry (no heartbeat), or its channel closed
        ``grace_ms`` ago and none attached since (a client rebuilding its stream reattaches at once)."""
        info = self._clients.get(client_id)
        if info is None:
            return "it ended its session or expired"
        now = self._clock.now_ms()
        if now - info.last_seen_ms >= self._expiry_ms:
            return f"no heartbeat for {(now - info.last_seen_ms) // 1000} s"
        if info.channel is None and info.detached_ms is not None and now - info.detached_ms >= grace_ms:
            return "its stream closed"
        return None

    def producers_for(self, group_or_topic: str) -> list[ClientInfo]:
        """Live producers with an open channel registered for a producer group or topic, freshest first."""
        found = [
            c
            for c in self._clients.values()
            if (group_or_topic in c.groups or group_or_topic in c.topics)
            and c.channel is not None
            and c.channel.is_open()
            and c.kind is ClientKind.PRODUCER
        ]
        return sorted(found, key=lambda c: -c.last_seen_ms)

    def consumers_of(self, group: str) -> list[ClientInfo]:
        now = self._clock.now_ms()
        return sorted(
            (
                c
                for c in self._clients.values()
                if group in c.groups
                and c.kind is not ClientKind.PRODUCER
                and (
                    now - c.last_seen_ms < self._expiry_ms or (c.channel is not None and c.channel.is_open())
                )
            ),
            key=lambda c: c.client_id,
        )

    def all(self) -> list[ClientInfo]:
        return list(self._clients.values())

    def expire(self) -> list[str]:
        now = self._clock.now_ms()
        gone = [
            cid
            for cid, c in self._clients.items()
            if now - c.last_seen_ms >= self._expiry_ms and (c.channel is None or not c.channel.is_open())
        ]
        for cid in gone:
            del self._clients[cid]
        return gone
