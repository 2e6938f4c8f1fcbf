"""Route and assignment entries (QueryRoute / QueryAssignment), built without I/O.

Clients keep only queues of ``broker.id == 0`` whose permission fits their role, and the Python client
refuses to send a message type missing from ``accept_message_types`` (protocol.md §2.3): every entry
carries both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from txmq.common.message import MessageQueue, MessageType
from txmq.protocol.grpc import pb


def endpoints(host: str, port: int) -> Any:
    """Endpoints for ``host:port``; IPv4 literals get the IPv4 scheme, anything else DOMAIN_NAME."""
    parts = host.split(".")
    is_ipv4 = len(parts) == 4 and all(p.isdecimal() for p in parts)
    scheme = pb.AddressScheme.IPv4 if is_ipv4 else pb.AddressScheme.DOMAIN_NAME
    if ":" in host:
        scheme = pb.AddressScheme.IPv6
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def permission_of(*, readable: bool, writable: bool) -> Any:
    if readable and writable:
        return pb.Permission.READ_WRITE
    if readable:
        return pb.Permission.READ
    if writable:
        return pb.Permission.WRITE
    return pb.Permission.NONE


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """What a route entry says about a topic (kept free of broker types: protocol sits below broker)."""

    name: str
    queues: int
    accepted: tuple[MessageType, ...]
    readable: bool = True
    writable: bool = True


def message_queue(topic: TopicRoute, queue_id: int, broker_name: str, where: Any) -> Any:
    entry = pb.MessageQueue(
        id=queue_id, permission=permission_of(readable=topic.readable, writable=topic.writable)
    )
    entry.topic.name = topic.name
    entry.broker.name = broker_name
    entry.broker.id = 0
    entry.broker.endpoints.CopyFrom(where)
    entry.accept_message_types.extend(int(t) for t in topic.accepted)
    return entry


def route(topic: TopicRoute, broker_name: str, where: Any) -> list[Any]:
    """One entry per queue of the topic, all on this broker."""
    return [message_queue(topic, q, broker_name, where) for q in range(topic.queues)]


def assignments(topic: TopicRoute, queues: list[MessageQueue], where: Any) -> list[Any]:
    """QueryAssignment entries; queue id -1 means "pop from any queue" (non-FIFO groups)."""
    return [
        pb.Assignment(message_queue=message_queue(topic, q.queue_id, q.broker_name, where)) for q in queues
    ]
