"""The gRPC door's SendMessage on a real broker: what it reads of the call, and how it words failures.

A send needs nothing from the call's metadata (no client id) and, when the first message names its born
host, nothing of the peer either: ``invocation_metadata()`` rebuilds the header tuple on every call (~4 µs
with the official clients' seven headers). The call context below stands in for grpc's and fails the
send if either is asked for.
"""

from __future__ import annotations

import asyncio
from typing import Any

from txmq.broker.broker import Broker
from txmq.broker.send import SendContext
from txmq.common.message import LeanMessage
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


async def test_single_sends_are_answered_with_their_stored_offsets(broker: Broker) -> None:
    """One message per request (a pipelined producer): each reply names the message and the queue
    offset it was stored at, whatever queue the round robin gave it."""
    servicer = MessagingServicer(broker, "127.0.0.1", 8081)
    answered: dict[str, int] = {}
    for i in range(9):
        request = _request("single", 1).replace(b"01SENDDOOR", b"01SINGLE%02d" % i)
        reply = await _send(servicer, request, _CallContext())
        assert reply.status.code == pb.Code.OK, reply.status.message
        (entry,) = reply.entries
        assert entry.status.code == pb.Code.OK
        assert not entry.transaction_id and not entry.recall_handle
        answered[entry.message_id] = entry.offset
    views = await broker.receive(
        group="g", topic="single", expression="*", batch_size=32, invisible_ms=30_000, long_poll_ms=0
    )
    assert {v.message_id: v.queue_offset for v in views} == answered
    assert sorted(answered.values()) != [0] * 9, "the topic's queues were filled past their first offset"


async def test_a_lane_append_is_answered_as_columns(broker: Broker) -> None:
    """``SendService.lane_append`` hands back where its records landed as the store's columns (no
    AppendResult per record): the gRPC door replies from the queue offsets, the remoting door
    (``lane_answer``) from the first log offset, and ``lane_results`` stays what it was."""
    sender = broker.sender
    lean = [LeanMessage(b"c", {}, "t", (), "01COLUMNS", None)]
    context = SendContext(born_host="127.0.0.1:1", queue_id=0)
    first = sender.lane_append("cols", lean, context)
    second = sender.lane_append("cols", lean, context)
    await asyncio.gather(first.durable, second.durable)
    assert list(first.appended.queue_offsets) == [0]
    assert list(second.appended.queue_offsets) == [1]
    assert second.appended.physical_offsets[0] == first.appended.physical_offsets[0] + first.appended.sizes[0]
    offset_id, queue_id, queue_offset = sender.lane_answer(second)
    (result,) = sender.lane_results(second)
    assert (offset_id, queue_id, queue_offset) == (result.offset_message_id, 0, 1)
    assert (result.message_id, result.queue.queue_id, result.queue_offset) == ("01COLUMNS", 0, 1)


async def test_each_send_keeps_its_own_born_host_past_the_door_s_context_cache(
    broker: Broker, monkeypatch: Any
) -> None:
    """The door keeps one SendContext per born host (building one costs ~6k instructions): sends from
    alternating hosts, single and batched, on both of its send paths, and more hosts than it keeps, are
    each stored with their own born host."""
    from txmq.server import grpc_server

    monkeypatch.setattr(grpc_server, "_CONTEXTS_MAX", 2)
    servicer = MessagingServicer(broker, "127.0.0.1", 8081)
    hosts = ["10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.2"]
    sent: list[str] = []
    for i, host in enumerate(hosts):
        count = 1 + i % 2
        request: Any = _request("hosts", count, born_host=host)
        if i == 3:  # a parsed request: the protobuf path (_send_general) takes it
            request = S.SendMessageRequest.FromString(request)
        reply = await _send(servicer, request, _CallContext())
        assert reply.status.code == pb.Code.OK, reply.status.message
        sent += [host] * count
        assert len(servicer._contexts) <= 2
    stored: list[str] = []
    for queue_id in range(broker.route("hosts").queues):
        read = broker.store.read_queue("hosts", queue_id, 0, 64)
        stored += [record.born_host for record in read.records]
    assert sorted(stored) == sorted(sent)
