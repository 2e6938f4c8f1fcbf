"""The official RocketMQ 5 Python client (rocketmq-python-client 5.1.2), unmodified, against a
``txmq broker`` subprocess: the clients are the judge of protocol compatibility."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .grpc_harness import BrokerProcess, Clients, receive_all

BROKER_FLAGS = [
    "--transaction-timeout", "1s", "--transaction-check-interval", "1s", "--max-delivery-attempts", "3",
    "--receive-invisible-min", "1s",  # a lease of 1 s expires within the test
]  # fmt: skip
# a receive above Apache's 32 messages streams in chunks (test_a_large_receive_streams_...)
BROKER_CONFIG = {"retry_backoff_ms": [1000], "grpc_receive_batch_max": 1024}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("broker"), extra_args=BROKER_FLAGS, config=BROKER_CONFIG)
    process.start()
    yield process
    process.stop()


def _message(rmq: Any, topic: str, body: bytes, *, tag: str | None = None, key: str | None = None) -> Any:
    message = rmq.Message()
    message.topic = topic
    message.body = body
    if tag:
        message.tag = tag
    if key:
        message.keys = key
    return message


def test_normal_send_and_simple_consumer_receive_ack(rmq: Any, clients: Clients) -> None:
    topic, group = _name("normal"), _name("g")
    producer = clients.producer(topic)
    sent = {}
    for i in range(5):
        message = _message(rmq, topic, f"body-{i}".encode(), tag="created", key=f"order-{i}")
        message.add_property("color", "red")
        receipt = producer.send(message)
        sent[receipt.message_id] = f"body-{i}".encode()
    consumer = clients.simple(group, topic)
    got = receive_all(consumer, 5)
    assert {m.message_id: m.body for m in got} == sent
    for message in got:
        assert message.tag == "created"
        assert message.topic == topic
        assert message.properties == {"color": "red"}
        assert len(message.keys) == 1
        assert next(iter(message.keys)).startswith("order-")
        assert message.delivery_attempt == 1
        assert not message.corrupted  # the body digest matched
    assert consumer.receive(32, 20) == []  # everything was acked


def test_push_consumer_consumes_everything(rmq: Any, clients: Clients) -> None:
    topic, group = _name("push"), _name("g")
    producer = clients.producer(topic)
    for i in range(10):
        producer.send(_message(rmq, topic, f"m{i}".encode()))
    seen: set[bytes] = set()
    done = threading.Event()

    class Listener(rmq.MessageListener):  # type: ignore[misc, name-defined]
        def consume(self, message: Any) -> Any:
            seen.add(message.body)
            if len(seen) == 10:
                done.set()
            return rmq.ConsumeResult.SUCCESS

    clients.push(group, topic, Listener())
    assert done.wait(15), f"only {len(seen)} of 10 messages arrived"
    assert seen == {f"m{i}".encode() for i in range(10)}


def test_fifo_groups_in_order_with_concurrent_consumers(
    rmq: Any, broker: BrokerProcess, clients: Clients
) -> None:
    topic, group = _name("fifo"), _name("g")
    broker.admin("topic.create", {"name": topic, "queues": 2, "message_type": "FIFO"})
    producer = clients.producer(topic)
    groups = ["a", "b", "c"]
    for seq in range(6):
        for g in groups:
            message = _message(rmq, topic, f"{g}:{seq}".encode())
            message.message_group = g
            producer.send(message)
    consumers = [clients.simple(group, topic), clients.simple(group, topic)]
    processed: list[tuple[str, int]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 60

    def work(consumer: Any) -> None:
        while time.monotonic() < deadline and len(processed) < 18:
            for message in consumer.receive(4, 10):
                g, seq = message.body.decode().split(":")
                with lock:
                    processed.append((g, int(seq)))
                consumer.ack(message)

    threads = [threading.Thread(target=work, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(processed) == 18
    for g in groups:
        assert [seq for name, seq in processed if name == g] == list(range(6))


def test_delay_message_not_before_its_time(rmq: Any, clients: Clients) -> None:
    topic, group = _name("delay"), _name("g")
    producer = clients.producer(topic)
    due_s = int(time.time()) + 3
    message = _message(rmq, topic, b"later")
    message.delivery_timestamp = due_s
    producer.send(message)
    consumer = clients.simple(group, topic, await_s=1)
    got = receive_all(consumer, 1, timeout_s=60)
    arrived = time.time()
    assert [m.body for m in got] == [b"later"]
    assert arrived >= due_s
    assert got[0].message_type == rmq.grpc_protocol.MessageType.DELAY


def test_failing_listener_retries_then_dead_letters(rmq: Any, clients: Clients) -> None:
    topic, group = _name("dlq"), _name("g")
    producer = clients.producer(topic)
    receipt = producer.send(_message(rmq, topic, b"poison"))
    attempts: list[int] = []

    class Failing(rmq.MessageListener):  # type: ignore[misc, name-defined]
        def consume(self, message: Any) -> Any:
            attempts.append(message.delivery_attempt)
            return rmq.ConsumeResult.FAILURE

    clients.push(group, topic, Failing())
    dead = clients.simple(_name("dlq-reader"), f"%DLQ%{group}")
    got = receive_all(dead, 1, timeout_s=60)
    assert [m.body for m in got] == [b"poison"]
    assert got[0].message_id == receipt.message_id
    assert attempts[:3] == [1, 2, 3]


def test_tag_filter(rmq: Any, clients: Clients) -> None:
    topic, group = _name("tags"), _name("g")
    producer = clients.producer(topic)
    for tag in ["A", "B", "C", "A", "B"]:
        producer.send(_message(rmq, topic, tag.encode(), tag=tag))
    consumer = clients.simple(group, topic, expression="A||C")
    got = receive_all(consumer, 3, timeout_s=60)
    assert sorted(m.body for m in got) == [b"A", b"A", b"C"]
    assert consumer.receive(32, 20) == []


def test_invisible_duration_expiry_redelivers_and_change_gives_a_new_handle(
    rmq: Any, clients: Clients
) -> None:
    topic, group = _name("invisible"), _name("g")
    producer = clients.producer(topic)
    receipt = producer.send(_message(rmq, topic, b"again"))
    consumer = clients.simple(group, topic, await_s=3)
    first = receive_all(consumer, 1, invisible_s=1, ack=False)
    assert [m.message_id for m in first] == [receipt.message_id]
    again = receive_all(consumer, 1, invisible_s=30, ack=False)
    assert [m.message_id for m in again] == [receipt.message_id]
    assert again[0].delivery_attempt == 2
    old_handle = again[0].receipt_handle
    consumer.change_invisible_duration(again[0], 30)
    assert again[0].receipt_handle != old_handle
    consumer.ack(again[0])
    assert consumer.receive(32, 20) == []


def test_transaction_commit_and_check_back(rmq: Any, clients: Clients) -> None:
    topic, group = _name("tx"), _name("g")
    checked: list[str] = []

    class Checker(rmq.TransactionChecker):  # type: ignore[misc, name-defined]
        def check(self, message: Any) -> Any:
            checked.append(message.message_id)
            return rmq.TransactionResolution.COMMIT

    producer = clients.producer(topic, checker=Checker())
    committed = producer.begin_transaction()
    producer.send(_message(rmq, topic, b"committed"), committed)
    committed.commit()
    rolled = producer.begin_transaction()
    producer.send(_message(rmq, topic, b"rolled-back"), rolled)
    rolled.rollback()
    orphan = producer.begin_transaction()
    orphan_receipt = producer.send(_message(rmq, topic, b"checked"), orphan)  # never decided by the client
    consumer = clients.simple(group, topic)
    got = receive_all(consumer, 2, timeout_s=60)
    assert sorted(m.body for m in got) == [b"checked", b"committed"]
    assert checked == [orphan_receipt.message_id]


def test_transaction_checker_raising_is_asked_again(rmq: Any, clients: Clients) -> None:
    """A checker that raises gives no answer: the broker keeps the half message and checks again."""
    topic, group = _name("txraise"), _name("g")
    calls: list[str] = []

    class FlakyChecker(rmq.TransactionChecker):  # type: ignore[misc, name-defined]
        def check(self, message: Any) -> Any:
            calls.append(message.message_id)
            if len(calls) == 1:
                raise RuntimeError("the database is unreachable for a moment")
            return rmq.TransactionResolution.COMMIT

    producer = clients.producer(topic, checker=FlakyChecker())
    receipt = producer.send(_message(rmq, topic, b"after-a-failed-check"), producer.begin_transaction())
    consumer = clients.simple(group, topic)
    got = receive_all(consumer, 1, timeout_s=60)
    assert [m.body for m in got] == [b"after-a-failed-check"]
    assert len(calls) >= 2
    assert set(calls) == {receipt.message_id}


def test_transaction_producer_gone_then_another_one_answers(rmq: Any, clients: Clients) -> None:
    """The producer that sent the half message shuts down undecided; a second producer of the topic
    answers the check-back and the message is delivered once."""
    topic, group = _name("txgone"), _name("g")

    class Undecided(rmq.TransactionChecker):  # type: ignore[misc, name-defined]
        def check(self, message: Any) -> Any:
            return rmq.TransactionResolution.UNKNOWN

    first = clients.producer(topic, checker=Undecided())
    orphan = first.send(_message(rmq, topic, b"orphaned"), first.begin_transaction())
    first.shutdown()
    answered: list[str] = []

    class Checker(rmq.TransactionChecker):  # type: ignore[misc, name-defined]
        def check(self, message: Any) -> Any:
            answered.append(message.message_id)
            return rmq.TransactionResolution.COMMIT

    clients.producer(topic, checker=Checker())
    consumer = clients.simple(group, topic)
    got = receive_all(consumer, 1, timeout_s=60)
    assert [m.body for m in got] == [b"orphaned"]
    assert set(answered) == {orphan.message_id}
    assert receive_all(consumer, 1, timeout_s=3) == []  # delivered once


def test_offsets_and_delays_survive_a_broker_restart(rmq: Any, tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path / "restart")
    process.start()
    topic, group = _name("restart"), _name("g")
    try:
        process.admin("topic.create", {"name": topic, "queues": 1})
        made = Clients(rmq, process.endpoint)
        producer = made.producer(topic)
        for i in range(6):
            producer.send(_message(rmq, topic, f"m{i}".encode()))
        due_s = int(time.time()) + 4
        delayed = _message(rmq, topic, b"delayed")
        delayed.delivery_timestamp = due_s
        producer.send(delayed)
        consumer = made.simple(group, topic)
        first: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(first) < 3 and time.monotonic() < deadline:
            for message in consumer.receive(3 - len(first), 20):
                consumer.ack(message)
                first.append(message.body)
        made.close()
        process.restart()
        made = Clients(rmq, process.endpoint)
        consumer = made.simple(group, topic)
        rest = receive_all(consumer, 4, timeout_s=60)
        arrived = time.time()
        made.close()
    finally:
        process.stop()
    assert first == [b"m0", b"m1", b"m2"]
    assert sorted(m.body for m in rest) == [b"delayed", b"m3", b"m4", b"m5"]
    assert arrived >= due_s


def test_offset_rpcs_the_proxy_lacks(rmq: Any, broker: BrokerProcess, clients: Clients) -> None:
    """PullMessage, GetOffset, UpdateOffset, QueryOffset via a raw stub (no official client has them)."""
    import grpc

    from txmq.protocol.grpc import convert, pb

    topic, group = _name("pull"), _name("g")
    broker.admin("topic.create", {"name": topic, "queues": 1})
    producer = clients.producer(topic)
    for i in range(4):
        producer.send(_message(rmq, topic, f"p{i}".encode(), tag="odd" if i % 2 else "even"))
    meta = (("x-mq-client-id", "test-client"),)
    queue = pb.MessageQueue(id=0)
    queue.topic.name = topic
    with grpc.insecure_channel(broker.endpoint) as channel:
        stub = pb.MessagingServiceStub(channel)
        S = pb.service
        end = stub.QueryOffset(
            S.QueryOffsetRequest(message_queue=queue, query_offset_policy=1), metadata=meta
        )
        begin = stub.QueryOffset(
            S.QueryOffsetRequest(message_queue=queue, query_offset_policy=0), metadata=meta
        )
        assert (begin.offset, end.offset) == (0, 4)
        missing = stub.GetOffset(
            S.GetOffsetRequest(message_queue=queue, group=pb.Resource(name=group)), metadata=meta
        )
        assert missing.status.code == pb.Code.OFFSET_NOT_FOUND
        request = S.PullMessageRequest(
            message_queue=queue, offset=1, batch_size=10, group=pb.Resource(name=group)
        )
        request.filter_expression.type = pb.FilterType.TAG
        request.filter_expression.expression = "odd"
        replies = list(stub.PullMessage(request, metadata=meta, timeout=10))
        assert replies[0].status.code == pb.Code.OK
        bodies = [r.message.body for r in replies if r.HasField("message")]
        assert bodies == [b"p1", b"p3"]
        assert all(r.message.system_properties.body_digest.checksum for r in replies if r.HasField("message"))
        assert replies[-1].next_offset == 4
        update = S.UpdateOffsetRequest(message_queue=queue, group=pb.Resource(name=group), offset=3)
        assert stub.UpdateOffset(update, metadata=meta).status.code == pb.Code.OK
        got = stub.GetOffset(
            S.GetOffsetRequest(message_queue=queue, group=pb.Resource(name=group)), metadata=meta
        )
        assert (got.status.code, got.offset) == (pb.Code.OK, 3)
        at = S.QueryOffsetRequest(message_queue=queue, query_offset_policy=2)
        convert.set_timestamp(at.timestamp, 0)
        assert stub.QueryOffset(at, metadata=meta).offset == 0
        no_id = stub.Heartbeat(S.HeartbeatRequest(client_type=pb.ClientType.PRODUCER))
        assert no_id.status.code == pb.Code.CLIENT_ID_REQUIRED
        sql = S.ReceiveMessageRequest(message_queue=queue, group=pb.Resource(name=group), batch_size=1)
        sql.filter_expression.type = pb.FilterType.SQL
        sql.filter_expression.expression = "a > 1"
        assert [r.status.code for r in stub.ReceiveMessage(sql, metadata=meta, timeout=5)] == [
            pb.Code.UNSUPPORTED
        ]


def test_a_large_receive_streams_every_chunk_and_acks_them(rmq: Any, broker: BrokerProcess) -> None:
    """A ReceiveMessage bigger than one leasing step (receive_chunks) is still one well-formed stream:
    status first, every message once, the delivery timestamp last; AckMessage takes them all."""
    import grpc

    from txmq.broker.broker import RECEIVE_CHUNK
    from txmq.protocol.grpc import convert, pb

    topic, group = _name("chunks"), _name("g")
    count = 2 * RECEIVE_CHUNK + 7
    broker.admin("topic.create", {"name": topic, "queues": 2})
    meta = (("x-mq-client-id", "test-client"),)
    S = pb.service
    with grpc.insecure_channel(broker.endpoint) as channel:
        stub = pb.MessagingServiceStub(channel)
        for start in range(0, count, 100):
            messages = []
            for i in range(start, min(count, start + 100)):
                message = pb.Message(body=f"m{i}".encode())
                message.topic.name = topic
                message.system_properties.message_id = f"01CHUNK{i:025d}"
                message.system_properties.body_encoding = pb.Encoding.IDENTITY
                message.system_properties.message_type = pb.MessageType.NORMAL
                messages.append(message)
            sent = stub.SendMessage(S.SendMessageRequest(messages=messages), metadata=meta)
            assert sent.status.code == pb.Code.OK
        request = S.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=count + 10)
        request.message_queue.topic.name = topic
        request.message_queue.id = -1
        request.filter_expression.expression = "*"
        convert.set_duration(request.invisible_duration, 60_000)
        replies = list(stub.ReceiveMessage(request, metadata=meta, timeout=10))
        kinds = [r.WhichOneof("content") for r in replies]
        assert kinds == ["status"] + ["message"] * count + ["delivery_timestamp"]
        assert replies[0].status.code == pb.Code.OK
        got = [r.message for r in replies[1:-1]]
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(count))
        entries = [
            S.AckMessageEntry(
                message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
            )
            for m in got
        ]
        acked = stub.AckMessage(
            S.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries
            ),
            metadata=meta,
        )
        assert acked.status.code == pb.Code.OK and len(acked.entries) == count
        assert {e.status.code for e in acked.entries} == {pb.Code.OK}
        assert [e.receipt_handle for e in acked.entries] == [e.receipt_handle for e in entries]
        repeated = stub.AckMessage(  # acked already, handles not expired: OK again, as Apache answers
            S.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries[:2]
            ),
            metadata=meta,
        )
        assert repeated.status.code == pb.Code.OK
        assert [e.status.code for e in repeated.entries] == [pb.Code.OK] * 2
        assert [e.message_id for e in repeated.entries] == [e.message_id for e in entries[:2]]
        again = list(stub.ReceiveMessage(request, metadata=meta, timeout=10))
        assert [r.WhichOneof("content") for r in again] == ["status", "delivery_timestamp"]
        assert again[0].status.code == pb.Code.MESSAGE_NOT_FOUND
