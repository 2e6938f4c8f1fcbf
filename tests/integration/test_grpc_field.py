"""Probes of an outside user with the official RocketMQ 5 Python client (unmodified) against a
``txmq broker`` subprocess: each test here guards a defect such a probe found."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from .grpc_harness import BrokerProcess, Clients


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class _Unknown:
    def __init__(self, rmq: Any) -> None:
        self.rmq = rmq

    def check(self, message: Any) -> Any:
        return self.rmq.TransactionResolution.UNKNOWN


@pytest.mark.parametrize("system_topic", ["RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX"])
def test_a_consumer_cannot_read_system_topics(rmq: Any, clients: Clients, system_topic: str) -> None:
    """Subscribing to RMQ_SYS_TRANS_HALF_TOPIC handed out uncommitted transactional messages (and
    SCHEDULE_TOPIC_XXXX delayed ones before their time); the Apache proxy answers ILLEGAL_TOPIC
    (40002, "cannot access system topic") to every client call naming a system topic."""
    topic = _name("tx")
    producer = clients.producer(topic, checker=_Unknown(rmq))
    secret = f"uncommitted-{uuid.uuid4().hex}".encode()
    transaction = producer.begin_transaction()
    message = rmq.Message()
    message.topic = topic
    message.body = secret
    producer.send(message, transaction)  # never committed
    delayed = rmq.Message()
    delayed.topic = topic
    delayed.body = secret
    delayed.delivery_timestamp = int(time.time()) + 3600
    clients.producer(topic).send(delayed)

    seen: list[bytes] = []
    refusals: list[str] = []
    deadline = time.monotonic() + 8
    consumer = None
    while time.monotonic() < deadline and not refusals:
        try:
            if consumer is None:
                consumer = clients.simple(_name("g"), system_topic, await_s=1)
            seen += [m.body for m in consumer.receive(32, 30)]
        except Exception as exc:  # the client's own exception types
            refusals.append(str(exc))
    assert secret not in seen
    assert refusals and "route" in refusals[0], refusals  # the client words a refused QueryRoute so
    # and a client that skips the route is refused the same way, by the proxy's code and message
    assert _raw_receive(clients.endpoint, system_topic) == (40002, True)


def _raw_receive(endpoint: str, topic: str, group: str = "") -> tuple[int, bool]:
    """ReceiveMessage on ``topic`` (by ``group``, else a fresh one) straight through the official
    package's generated stub: the first response's (status code, whether its message names a system
    topic)."""
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as d  # type: ignore[import-untyped]
    from rocketmq.grpc_protocol import service_pb2 as s  # type: ignore[import-untyped]
    from rocketmq.grpc_protocol import service_pb2_grpc as sg  # type: ignore[import-untyped]

    request = s.ReceiveMessageRequest(
        group=d.Resource(name=group or _name("g")),
        message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=-1),
        filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
        batch_size=32,
    )
    request.invisible_duration.FromSeconds(30)
    request.long_polling_timeout.FromSeconds(1)
    metadata = [("x-mq-client-id", "field-probe"), ("x-mq-protocol", "v2")]
    with grpc.insecure_channel(endpoint) as channel:
        first = next(
            iter(sg.MessagingServiceStub(channel).ReceiveMessage(request, metadata=metadata, timeout=10))
        )
    return first.status.code, "system topic" in first.status.message


def _retry_while_reconnecting(call: Any) -> Any:
    """``call()``, again while the client's channel is still reconnecting to the restarted broker."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return call()
        except Exception as exc:
            if "UNAVAILABLE" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_message_received_before_a_broker_restart_is_acked_after_it(rmq: Any, tmp_path: Path) -> None:
    """A restart (SIGTERM, start) dropped every lease: the ack answered INVALID_RECEIPT_HANDLE (40013)
    and the message came again at once with delivery attempt 1, a duplicate the Apache broker (POP
    checkpoints on disk) does not make."""
    broker = BrokerProcess(tmp_path / "broker")
    broker.start()
    clients = Clients(rmq, broker.endpoint)
    try:
        topic, group = _name("restart"), _name("g")
        producer = clients.producer(topic)
        for body in (b"acked-after", b"nacked-after"):
            message = rmq.Message()
            message.topic = topic
            message.body = body
            producer.send(message)
        consumer = clients.simple(group, topic, await_s=1)
        got: dict[bytes, Any] = {}
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got.update((m.body, m) for m in consumer.receive(32, 60))
        assert sorted(got) == [b"acked-after", b"nacked-after"]

        broker.restart()
        _retry_while_reconnecting(lambda: consumer.ack(got[b"acked-after"]))
        _retry_while_reconnecting(lambda: consumer.change_invisible_duration(got[b"nacked-after"], 1))
        again: list[Any] = []
        deadline = time.monotonic() + 30
        while not again and time.monotonic() < deadline:
            again = consumer.receive(32, 60)
        assert [(m.body, m.delivery_attempt) for m in again] == [(b"nacked-after", 2)]
        consumer.ack(again[0])
    finally:
        clients.close()
        broker.stop()


def test_a_recall_after_delivery_raises_in_the_official_client(rmq: Any, clients: Clients) -> None:
    """The broker answered MESSAGE_NOT_FOUND (40401), which the Python client treats as success: its
    recall_message returned '' instead of raising, so the caller believed the message recalled."""
    topic = _name("recall")
    producer = clients.producer(topic)
    message = rmq.Message()
    message.topic = topic
    message.body = b"due-now"
    message.delivery_timestamp = int(time.time()) + 1
    receipt = producer.send(message)
    consumer = clients.simple(_name("g"), topic, await_s=1)
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = consumer.receive(32, 30)
    assert [m.body for m in got] == [b"due-now"]
    with pytest.raises(Exception, match=r"40400.*already delivered"):
        producer.recall_message(topic, receipt.recall_handle)


@pytest.mark.parametrize("name", ["KEYS", "TAGS", "UNIQ_KEY", "TRAN_MSG", "__TXMQ_TYPE"])
def test_a_user_property_named_like_a_system_one_is_refused(rmq: Any, clients: Clients, name: str) -> None:
    """It was dropped without a word (the message arrived without it); the Apache proxy refuses the send
    with ILLEGAL_MESSAGE_PROPERTY_KEY (40007), "property is used by system"."""
    topic = _name("props")
    producer = clients.producer(topic)
    message = rmq.Message()
    message.topic = topic
    message.body = b"x"
    message.add_property(name, "mine")
    with pytest.raises(Exception, match=rf"40007.*property {name} is used by the system"):
        producer.send(message)
    fine = rmq.Message()
    fine.topic = topic
    fine.body = b"x"
    fine.add_property("mine", "kept")
    producer.send(fine)
    consumer = clients.simple(_name("g"), topic, await_s=1)
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = consumer.receive(32, 30)
    assert [m.properties for m in got] == [{"mine": "kept"}]


def _fifo(rmq: Any, topic: str, group: str) -> Any:
    message = rmq.Message()
    message.topic = topic
    message.body = group.encode()
    message.message_group = group
    return message


def test_a_message_group_of_64_bytes_or_more_is_refused(rmq: Any, clients: Clients) -> None:
    """Groups up to 1,024 bytes were accepted over gRPC; the Apache proxy refuses a message group of
    ``maxMessageGroupSize`` (64) UTF-8 bytes or more with ILLEGAL_MESSAGE_GROUP (40006)."""
    topic = _name("fifo")
    producer = clients.producer(topic)
    for group in ("g" * 64, "g" * 65, "é" * 32, "g" * 1024):
        with pytest.raises(Exception, match=r"40006.*message group is \d+ bytes"):
            producer.send(_fifo(rmq, topic, group))
    kept = "g" * 63
    producer.send(_fifo(rmq, topic, kept))
    consumer = clients.simple(_name("g"), topic, await_s=1)
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = consumer.receive(32, 30)
    assert [(m.message_group, m.body) for m in got] == [(kept, kept.encode())]


def test_a_message_group_of_whitespace_or_control_characters_is_refused(rmq: Any, clients: Clients) -> None:
    """A group of blanks was taken as a FIFO group and one with \\x01 answered 40007 naming an internal
    property; the proxy answers ILLEGAL_MESSAGE_GROUP (40006) for both (the client refuses blanks itself,
    so this goes through the stub)."""
    topic = _name("fifo")
    clients.producer(topic)  # creates the topic
    assert _raw_send(clients.endpoint, topic, message_group="   ")[0] == 40006
    assert _raw_send(clients.endpoint, topic, message_group="a\x01b")[0] == 40006
    assert _raw_send(clients.endpoint, topic, message_group="a\x85b")[0] == 40006


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("tag", "a|b", 40004),
        ("tag", "a\x02", 40004),
        ("tag", "a\x7f", 40004),
        ("keys", "k\x03", 40005),
        ("property", "v\x04", 40007),
        ("property_name", "k\x1f", 40007),
        ("message_id", "", 40009),
        ("message_id", "  ", 40009),
    ],
)
def test_control_characters_and_bars_are_refused_with_the_proxy_codes(
    clients: Clients, field: str, value: str, code: int
) -> None:
    """A tag 'a|b' (which no tag filter can select), and control characters in a key or a user property,
    were stored; a tag with \\x02 answered 40007 naming an internal property; a message without a message
    id was stored under a broker-made one. The proxy refuses them with ILLEGAL_MESSAGE_TAG / _KEY /
    _PROPERTY_KEY / _ID, and nothing is stored."""
    topic = _name("chars")
    clients.producer(topic)
    status, stored = _raw_send(clients.endpoint, topic, **{field: value})
    assert (status, stored) == (code, False)
    assert _raw_send(clients.endpoint, topic, tag="fine")[0] == 20000


def _raw_send(endpoint: str, topic: str, **fields: str) -> tuple[int, bool]:
    """SendMessage of one message through the official package's generated stub, with one field set
    as given (``tag``, ``keys``, ``message_group``, ``message_id``, ``property`` value or
    ``property_name``): the
    status code and whether an entry carries an offset (a stored message)."""
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as d
    from rocketmq.grpc_protocol import service_pb2 as s
    from rocketmq.grpc_protocol import service_pb2_grpc as sg

    message = d.Message(topic=d.Resource(name=topic), body=b"x")
    sysp = message.system_properties
    sysp.message_id = fields.get("message_id", uuid.uuid4().hex.upper())
    sysp.message_type = d.FIFO if "message_group" in fields else d.NORMAL
    sysp.body_encoding = d.IDENTITY
    sysp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    sysp.born_host = "127.0.0.1"
    if "tag" in fields:
        sysp.tag = fields["tag"]
    if "keys" in fields:
        sysp.keys.append(fields["keys"])
    if "message_group" in fields:
        sysp.message_group = fields["message_group"]
    if "property" in fields:
        message.user_properties["k"] = fields["property"]
    if "property_name" in fields:
        message.user_properties[fields["property_name"]] = "v"
    metadata = [("x-mq-client-id", "field-probe"), ("x-mq-protocol", "v2")]
    with grpc.insecure_channel(endpoint) as channel:
        reply = sg.MessagingServiceStub(channel).SendMessage(
            s.SendMessageRequest(messages=[message]), metadata=metadata, timeout=10
        )
    return reply.status.code, any(entry.offset > 0 or entry.status.code == 20000 for entry in reply.entries)


def test_a_system_consumer_group_is_refused(rmq: Any, clients: Clients) -> None:
    """A group named ``CID_RMQ_SYS_...`` (RocketMQ's own, e.g. its POP revive group) received the
    topic's messages; the Apache proxy answers ILLEGAL_CONSUMER_GROUP (40003), "cannot use system
    consumer group", and leases nothing."""
    topic = _name("sysgroup")
    clients.producer(topic).send(_fifo(rmq, topic, "g1"))
    assert _raw_receive(clients.endpoint, topic, "CID_RMQ_SYS_REVIVE_GROUP")[0] == 40003
    got: list[Any] = []
    consumer = clients.simple(_name("g"), topic, await_s=1)
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = consumer.receive(32, 30)
    assert [m.body for m in got] == [b"g1"]  # still there for a proper group
