"""A SendMessage of many messages is answered from the send lane's columns (``wire.lane_reply``): each
entry carries OK, its message's id and the queue offset that message was stored at, in request order;
a failed batch still answers one failed entry per message."""

from __future__ import annotations

import grpc

from txmq.broker.broker import Broker
from txmq.common import errors
from txmq.protocol.grpc import pb
from txmq.server.grpc_server import serve

S = pb.service
METADATA = (("x-mq-client-id", "batch-reply-test"),)


def _request(topic: str, count: int, first: int = 0, tag: str = "t") -> object:
    messages = []
    for i in range(first, first + count):
        message = pb.Message(body=b"m%05d" % i)
        message.topic.name = topic
        message.system_properties.message_id = f"01BATCHREPLY{i:020d}"
        message.system_properties.message_type = pb.MessageType.NORMAL
        message.system_properties.tag = tag
        messages.append(message)
    return S.SendMessageRequest(messages=messages)


async def _stored_offsets(broker: Broker, topic: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for queue_id in range(broker.route(topic).queues):
        result = await broker.pull(group=None, topic=topic, queue_id=queue_id, offset=0, batch_size=1000)
        found.update((view.message_id, view.queue_offset) for view in result.messages)
    return found


async def test_batch_entries_name_each_message_and_its_stored_offset(broker: Broker) -> None:
    server = await serve(broker, "127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.txmq_port}") as channel:
            stub = pb.MessagingServiceStub(channel)
            assert (await stub.SendMessage(_request("br", 1), metadata=METADATA)).status.code == pb.Code.OK
            replies = [
                await stub.SendMessage(_request("br", 40, 1 + 40 * n), metadata=METADATA) for n in range(3)
            ]
            stored = await _stored_offsets(broker, "br")
            for n, reply in enumerate(replies):
                assert reply.status.code == pb.Code.OK, reply.status.message
                ids = [f"01BATCHREPLY{i:020d}" for i in range(1 + 40 * n, 41 + 40 * n)]
                assert [entry.message_id for entry in reply.entries] == ids
                assert all(entry.status.code == pb.Code.OK for entry in reply.entries)
                assert [entry.offset for entry in reply.entries] == [stored[i] for i in ids]
                assert not any(entry.transaction_id or entry.recall_handle for entry in reply.entries)
    finally:
        await server.stop(grace=None)


async def test_a_failed_batch_answers_every_message_with_the_error(broker: Broker) -> None:
    server = await serve(broker, "127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.txmq_port}") as channel:
            stub = pb.MessagingServiceStub(channel)
            reply = await stub.SendMessage(_request("bad", 5, tag="a||b"), metadata=METADATA)
            assert reply.status.code == errors.ILLEGAL_MESSAGE_TAG, reply.status.message
            assert [entry.message_id for entry in reply.entries] == [
                f"01BATCHREPLY{i:020d}" for i in range(5)
            ]
            assert {entry.status.code for entry in reply.entries} == {reply.status.code}
    finally:
        await server.stop(grace=None)
