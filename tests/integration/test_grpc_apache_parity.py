"""Differences from Apache RocketMQ a RocketMQ 5 client met (session 20, field4), each checked against a
``txmq broker`` with default settings through the official Python client, or its generated stub for
requests the client does not build. Apache's answers are in benchmarks/results/field4.md."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .grpc_harness import BrokerProcess, Clients

HOUR_S = 3600


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class _Stub:
    """The official package's generated stub, for requests its client does not build."""

    def __init__(self, endpoint: str) -> None:
        import grpc
        from rocketmq.grpc_protocol import definition_pb2 as d  # type: ignore[import-untyped]
        from rocketmq.grpc_protocol import service_pb2 as s  # type: ignore[import-untyped]
        from rocketmq.grpc_protocol import service_pb2_grpc as sg  # type: ignore[import-untyped]

        self.d, self.s = d, s
        self.channel = grpc.insecure_channel(endpoint)
        self.stub = sg.MessagingServiceStub(self.channel)
        self.metadata = [("x-mq-client-id", _name("probe")), ("x-mq-protocol", "v2")]

    def receive(
        self, topic: str, group: str, *, invisible_s: int | None = 30, batch: int = 32, expression: str = "*",
        auto_renew: bool = False,
    ) -> tuple[int, list[Any]]:  # fmt: skip
        """(the first response's status code, the messages delivered)."""
        d = self.d
        request = self.s.ReceiveMessageRequest(
            group=d.Resource(name=group),
            message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=-1),
            filter_expression=d.FilterExpression(type=d.TAG, expression=expression),
            batch_size=batch,
            auto_renew=auto_renew,
        )
        if invisible_s is not None:
            request.invisible_duration.FromSeconds(invisible_s)
        request.long_polling_timeout.FromSeconds(1)
        responses = list(self.stub.ReceiveMessage(request, metadata=self.metadata, timeout=15))
        return responses[0].status.code, [r.message for r in responses if r.HasField("message")]

    def ack(self, topic: str, group: str, message: Any) -> tuple[int, int]:
        """(the response's status code, its entry's)."""
        d = self.d
        entry = self.s.AckMessageEntry(
            message_id=message.system_properties.message_id,
            receipt_handle=message.system_properties.receipt_handle,
        )
        request = self.s.AckMessageRequest(
            group=d.Resource(name=group), topic=d.Resource(name=topic), entries=[entry]
        )
        reply = self.stub.AckMessage(request, metadata=self.metadata, timeout=10)
        return reply.status.code, (reply.entries[0].status.code if reply.entries else -1)

    def change_invisible(self, topic: str, group: str, message: Any, invisible_s: int) -> int:
        d = self.d
        request = self.s.ChangeInvisibleDurationRequest(
            group=d.Resource(name=group),
            topic=d.Resource(name=topic),
            receipt_handle=message.system_properties.receipt_handle,
            message_id=message.system_properties.message_id,
        )
        request.invisible_duration.FromSeconds(invisible_s)
        return int(self.stub.ChangeInvisibleDuration(request, metadata=self.metadata, timeout=10).status.code)

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def stub(broker: BrokerProcess) -> Iterator[_Stub]:
    made = _Stub(broker.endpoint)
    yield made
    made.close()


def _send(rmq: Any, clients: Clients, topic: str, bodies: list[bytes], **fields: Any) -> None:
    producer = clients.producer(topic)
    for body in bodies:
        message = rmq.Message()
        message.topic = topic
        message.body = body
        for name, value in fields.items():
            setattr(message, name, value)
        producer.send(message)


def _receive_until(stub: _Stub, topic: str, group: str, count: int, **kw: Any) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        code, messages = stub.receive(topic, group, **kw)
        assert code in (20000, 40401), code  # OK, or MESSAGE_NOT_FOUND while none is visible yet
        got += messages
    return got


def test_receive_invisible_durations_outside_10s_to_12h_are_refused(
    rmq: Any, clients: Clients, stub: _Stub
) -> None:
    """txmq leased for 1 s .. 10 s (and took no duration at all as 30 s). The Apache proxy refuses
    ILLEGAL_INVISIBLE_TIME (40011) under minInvisibleTimeMillsForRecv (10 s) and over
    maxInvisibleTimeMills (12 h); a request without a duration asks 0."""
    topic, group = _name("inv"), _name("g")
    _send(rmq, clients, topic, [b"m"])
    for invisible_s in (1, 9, 12 * HOUR_S + 1, None):
        assert stub.receive(topic, group, invisible_s=invisible_s)[0] == 40011, invisible_s
    (message,) = _receive_until(stub, topic, group, 1, invisible_s=10)
    # a change of invisible time may be 0 .. 12 h (the proxy's validateInvisibleTime with minimum 0)
    assert stub.change_invisible(topic, group, message, 12 * HOUR_S + 1) == 40011
    assert stub.change_invisible(topic, group, message, 1) == 20000


def test_an_auto_renew_receive_leases_for_the_brokers_60_seconds(
    rmq: Any, clients: Clients, stub: _Stub
) -> None:
    """The official PushConsumer receives with auto_renew and no duration: txmq leased 30 s. The Apache
    proxy (enableProxyAutoRenew) leases defaultInvisibleTimeMills, 60 s, whatever the request asks."""
    topic, group = _name("renew"), _name("g")
    _send(rmq, clients, topic, [b"m"])
    (message,) = _receive_until(stub, topic, group, 1, invisible_s=None, auto_renew=True)
    assert message.system_properties.invisible_duration.seconds == 60
    assert stub.receive(topic, _name("g"), invisible_s=5, auto_renew=True)[0] == 20000  # not validated


def test_a_receive_is_served_at_most_32_messages(rmq: Any, clients: Clients, stub: _Stub) -> None:
    """A batch size of 40 was served 40 messages; the Apache proxy lowers it to 32
    (ConsumerProcessor.popMessage, MAX_MSG_NUMS_FOR_POP_REQUEST)."""
    topic, group = _name("batch"), _name("g")
    _send(rmq, clients, topic, [f"m{i}".encode() for i in range(40)])
    largest = 0
    got = 0
    deadline = time.monotonic() + 30
    while got < 40 and time.monotonic() < deadline:
        _, messages = stub.receive(topic, group, batch=40)
        largest = max(largest, len(messages))
        got += len(messages)
    assert got == 40 and largest <= 32, (got, largest)


def test_a_key_with_a_space_is_two_keys_as_apache_stores_it(
    rmq: Any, clients: Clients, stub: _Stub, broker: BrokerProcess
) -> None:
    """A key with a space was refused (40005). The Apache proxy accepts it and joins a message's keys
    with a space into KEYS (MessageConst.KEY_SEPARATOR): the index and the delivered message see two
    keys. A key of whitespace only stays refused (ILLEGAL_MESSAGE_KEY)."""
    topic, group = _name("keys"), _name("g")
    marker = uuid.uuid4().hex[:8]
    _send(rmq, clients, topic, [b"spaced"], keys=f"order-{marker} user-{marker}")
    (message,) = _receive_until(stub, topic, group, 1)
    assert sorted(message.system_properties.keys) == [f"order-{marker}", f"user-{marker}"]
    found = broker.admin("query.key", {"key": f"user-{marker}", "topic": topic})
    assert [m["topic"] for m in found] == [topic]
    d, s = stub.d, stub.s  # the official client refuses a blank key itself: the stub sends one
    wire = s.SendMessageRequest(
        messages=[
            d.Message(
                topic=d.Resource(name=topic),
                body=b"blank",
                system_properties=d.SystemProperties(
                    keys=["   "], message_id=uuid.uuid4().hex, message_type=d.NORMAL, body_encoding=d.IDENTITY
                ),
            )
        ]
    )
    reply = stub.stub.SendMessage(wire, metadata=stub.metadata, timeout=10)
    assert reply.status.code == 40005, reply.status


def test_an_ack_names_an_existing_topic_its_handle_belongs_to(
    rmq: Any, clients: Clients, stub: _Stub
) -> None:
    """AckMessage ignored its topic. Apache: a topic that does not exist is TOPIC_NOT_FOUND (40402, the
    broker's TOPIC_NOT_EXIST); another existing topic makes Apache ack that topic's queue and offset,
    answer OK and deliver the message again, so txmq refuses it (INVALID_RECEIPT_HANDLE, 40013)."""
    topic, other, group = _name("ack"), _name("other"), _name("g")
    _send(rmq, clients, topic, [b"m"])
    _send(rmq, clients, other, [b"o"])
    (message,) = _receive_until(stub, topic, group, 1)
    assert stub.ack(_name("missing"), group, message) == (40402, 40402)
    assert stub.ack("", group, message)[0] == 40002  # ILLEGAL_TOPIC for the request (the proxy's check)
    assert stub.ack(other, group, message) == (40013, 40013)
    assert stub.change_invisible(other, group, message, 30) == 40013
    assert stub.ack(topic, group, message) == (20000, 20000)


def test_a_tag_expression_with_an_empty_alternative_selects_the_others(
    rmq: Any, clients: Clients, stub: _Stub
) -> None:
    """``A||`` was refused (40010); Apache's FilterAPI splits on '||', trims and skips empty parts."""
    topic, group = _name("tags"), _name("g")
    _send(rmq, clients, topic, [b"a"], tag="A")
    _send(rmq, clients, topic, [b"b"], tag="B")
    got = _receive_until(stub, topic, group, 1, expression="A||")
    assert [m.body for m in got] == [b"a"]
    assert stub.receive(topic, _name("g"), expression="||")[0] == 40010
