"""The gRPC door's SendMessage on a real broker: what it reads of the call, and how it words failures.

A send needs nothing from the call's metadata (no client id) and, when the first message names its born
host, nothing of the peer either: ``invocation_metadata()`` rebuilds the header tuple on every call (~4 µs
with the official clients' seven headers). The call context below stands in for grpc's and fails the
send if either is asked for.
"""

from __future__ import annotations

from typing import Any

from txmq.broker.broker import Broker
from txmq.protocol.grpc import convert, pb
from txmq.server.grpc_server import MessagingServicer

S = pb.service


class _CallContext:
    """grpc's ServicerContext as far as a send may use it: the peer only without a born host."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def invocation_metadata(self) -> Any:
        self.asked.append("metadata")
        raise AssertionError("a send must not read the call's metadata")

    def peer(self) -> str:
        self.asked.append("peer")
        return "ipv4:127.0.0.7:5555"


def _request(
    topic: str, count: int, *, born_host: str = "10.0.0.7", tag: str = "t", deliver_at_ms: int = 0
) -> bytes:
    messages = []
    for i in range(count):
        message = pb.Message(body=b"x" * 100)
        message.topic.name = topic
        sysp = message.system_properties
        sysp.message_id = f"01SENDDOOR{i:024d}"
        sysp.message_type = pb.MessageType.DELAY if deliver_at_ms else pb.MessageType.NORMAL
        sysp.tag = tag
        sysp.born_host = born_host
        if deliver_at_ms:  # declined by wire.send_lane: the protobuf path
            convert.set_timestamp(sysp.delivery_timestamp, deliver_at_ms)
        messages.append(message)
    return bytes(S.SendMessageRequest(messages=messages).SerializeToString())


async def _send(servicer: MessagingServicer, request: bytes, context: _CallContext) -> Any:
    reply = await servicer.SendMessage(request, context)
    return S.SendMessageResponse.FromString(reply) if isinstance(reply, bytes) else reply


async def test_a_send_reads_neither_metadata_nor_peer(broker: Broker) -> None:
    servicer = MessagingServicer(broker, "127.0.0.1", 8081)
    for count in (1, 3):
        context = _CallContext()
        reply = await _send(servicer, _request("door", count), context)
        assert reply.status.code == pb.Code.OK, reply.status.message
        assert [e.message_id for e in reply.entries] == [f"01SENDDOOR{i:024d}" for i in range(count)]
        assert context.asked == []
    views = await broker.receive(
        group="g", topic="door", expression="*", batch_size=8, invisible_ms=30_000, long_poll_ms=0
    )
    assert sorted(v.born_host for v in views) == ["10.0.0.7"] * 4


async def test_the_protobuf_path_reads_no_metadata_either(broker: Broker) -> None:
    context = _CallContext()
    reply = await _send(
        MessagingServicer(broker, "127.0.0.1", 8081),
        _request("later", 1, deliver_at_ms=broker.clock.now_ms() + 10_000),
        context,
    )
    assert reply.status.code == pb.Code.OK, reply.status.message
    assert context.asked == []


async def test_without_a_born_host_the_peer_names_it(broker: Broker) -> None:
    context = _CallContext()
    reply = await _send(
        MessagingServicer(broker, "127.0.0.1", 8081), _request("door", 1, born_host=""), context
    )
    assert reply.status.code == pb.Code.OK, reply.status.message
    assert context.asked == ["peer"]
    views = await broker.receive(
        group="g", topic="door", expression="*", batch_size=8, invisible_ms=30_000, long_poll_ms=0
    )
    assert [v.born_host for v in views] == ["127.0.0.7"]


async def test_failures_keep_their_wording(broker: Broker) -> None:
    servicer = MessagingServicer(broker, "127.0.0.1", 8081)
    bad_tag = await _send(servicer, _request("door", 2, tag="a|b"), _CallContext())
    assert bad_tag.status.code == pb.Code.ILLEGAL_MESSAGE_TAG
    assert [e.status.code for e in bad_tag.entries] == [pb.Code.ILLEGAL_MESSAGE_TAG] * 2
    assert [e.message_id for e in bad_tag.entries] == [f"01SENDDOOR{i:024d}" for i in range(2)]
    garbage = await _send(servicer, b"\xff\xff\xff", _CallContext())
    assert garbage.status.code == pb.Code.BAD_REQUEST
    assert garbage.status.message.startswith("malformed SendMessageRequest")
    assert list(garbage.entries) == []
