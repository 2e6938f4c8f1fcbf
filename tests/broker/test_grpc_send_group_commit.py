"""A gRPC SendMessage carrying many messages is one append and one group commit (one fsync), not one per
message: the door hands the whole request to the broker, which appends it as one atomic batch."""

from __future__ import annotations

import grpc

from txmq.broker.broker import Broker
from txmq.protocol.grpc import pb
from txmq.server.grpc_server import serve

S = pb.service


def _request(topic: str, count: int) -> object:
    messages = []
    for i in range(count):
        message = pb.Message(body=b"x" * 1024)
        message.topic.name = topic
        message.system_properties.message_id = f"01GROUPCOMMIT{i:021d}"
        message.system_properties.message_type = pb.MessageType.NORMAL
        messages.append(message)
    return S.SendMessageRequest(messages=messages)


async def test_one_send_request_is_one_group_commit(broker: Broker) -> None:
    server = await serve(broker, "127.0.0.1", 0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.txmq_port}") as channel:
            stub = pb.MessagingServiceStub(channel)
            metadata = (("x-mq-client-id", "group-commit-test"),)
            first = await stub.SendMessage(_request("gc", 1), metadata=metadata)  # creates the topic
            assert first.status.code == pb.Code.OK
            before = broker.store.flush_count
            reply = await stub.SendMessage(_request("gc", 100), metadata=metadata)
            assert reply.status.code == pb.Code.OK, reply.status.message
            assert len(reply.entries) == 100
            assert broker.store.flush_count - before == 1
    finally:
        await server.stop(grace=None)
