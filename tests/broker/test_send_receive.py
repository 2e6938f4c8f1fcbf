"""Send, receive, ack, redelivery, DLQ, FIFO, tags and delays on a real store, stepped by a FakeClock."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.broker.broker import Broker, OffsetPolicy
from txmq.broker.send import SendContext, fifo_queue_of
from txmq.common import errors, names
from txmq.common.clock import FakeClock
from txmq.common.message import LeanMessage, Message

from .conftest import make_config

CTX = SendContext(producer_group="pg", born_host="127.0.0.1:1")


async def send(broker: Broker, topic: str, body: bytes, **kw: object) -> str:
    results = await broker.send([Message(topic=topic, body=body, **kw)], CTX)  # type: ignore[arg-type]
    return results[0].message_id


async def receive(
    broker: Broker, group: str, topic: str, n: int = 32, expr: str = "*", invisible_ms: int = 10_000
):  # type: ignore[no-untyped-def]
    return await broker.receive(
        group=group, topic=topic, expression=expr, batch_size=n, invisible_ms=invisible_ms, long_poll_ms=0
    )


async def receive_acked(broker: Broker, group: str, topic: str) -> list[bytes]:
    got = await receive(broker, group, topic)
    for view in got:
        assert view.receipt_handle is not None
        broker.ack(group=group, receipt_handle=view.receipt_handle)
    return [v.body for v in got]


async def test_send_then_receive_and_ack(broker: Broker) -> None:
    ids = [await send(broker, "orders", f"m{i}".encode()) for i in range(10)]
    got = await receive(broker, "g1", "orders")
    assert sorted(v.message_id for v in got) == sorted(ids)
    assert all(v.delivery_attempt == 1 for v in got)
    for view in got:
        assert view.receipt_handle is not None
        broker.ack(group="g1", receipt_handle=view.receipt_handle)
    assert await receive(broker, "g1", "orders") == []
    # a second group sees everything independently
    assert len(await receive(broker, "g2", "orders")) == 10


async def test_a_used_handle_acks_as_a_no_op_until_it_expires(broker: Broker, clock: FakeClock) -> None:
    # Apache answers a repeated ack OK (a client retrying an ack whose answer was lost); only an expired
    # handle is refused. A replaced handle's ack changes nothing: the new lease still holds the message.
    await send(broker, "t", b"x")
    (view,) = await receive(broker, "g", "t", invisible_ms=30_000)
    assert view.receipt_handle is not None
    new_handle = broker.change_invisible(group="g", receipt_handle=view.receipt_handle, invisible_ms=5_000)
    broker.ack(group="g", receipt_handle=view.receipt_handle)  # replaced: OK, nothing changes
    assert broker.pop.inflight_of("g") == 1
    clock.advance(5_001)
    await broker.tick(clock.now_ms())
    (again,) = await receive(broker, "g", "t", invisible_ms=60_000)  # the new lease expired: redelivered
    assert again.body == b"x" and again.delivery_attempt == 2
    with pytest.raises(errors.InvalidReceiptHandle, match="expired"):
        broker.ack(group="g", receipt_handle=new_handle)  # its invisible time passed
    assert again.receipt_handle is not None
    broker.ack(group="g", receipt_handle=again.receipt_handle)
    broker.ack(group="g", receipt_handle=again.receipt_handle)  # repeated: OK
    assert broker.pop.inflight_of("g") == 0
    assert await receive(broker, "g", "t") == []


async def test_invisible_expiry_redelivers_with_attempt_count_then_dlq(
    tmp_path: Path, clock: FakeClock
) -> None:
    broker = await Broker.open(make_config(tmp_path, max_delivery_attempts=3), clock=clock)
    try:
        message_id = await send(broker, "t", b"payload")
        attempts = []
        for _ in range(3):
            got = await receive(broker, "g", "t", invisible_ms=2_000)
            assert len(got) == 1 and got[0].message_id == message_id
            attempts.append(got[0].delivery_attempt)
            clock.advance(2_001)
            await broker.tick(clock.now_ms())
        assert attempts == [1, 2, 3]
        assert await receive(broker, "g", "t") == []
        dlq = await receive(broker, "dlq-reader", names.dlq_topic("g"))
        assert [v.message_id for v in dlq] == [message_id]
        assert dlq[0].properties.get("DLQ_ORIGIN_TOPIC") == "t"
    finally:
        await broker.close()


async def test_tag_filter(broker: Broker) -> None:
    await send(broker, "t", b"a", tags="A")
    await send(broker, "t", b"b", tags="B")
    await send(broker, "t", b"c", tags="C")
    got = await receive(broker, "g", "t", expr="A || C")
    assert sorted(v.body for v in got) == [b"a", b"c"]
    # as RocketMQ's FilterAPI: empty alternatives are skipped, so "A ||" selects A (it was refused)
    for group, expr in (("g2", "A || "), ("g3", "||A"), ("g4", " A ||  || ")):
        assert [v.body for v in await receive(broker, group, "t", expr=expr)] == [b"a"], expr
    for expr in ("||", " || ", "A || *"):  # nothing but bars, or '*' as one tag among others
        with pytest.raises(errors.InvalidFilter):
            await receive(broker, "g5", "t", expr=expr)


async def test_fifo_group_waits_for_previous_message(broker: Broker) -> None:
    broker.topics.create("fifo", queues=2)
    broker.set_group_policy("g", fifo=True)
    for i in range(3):
        await send(broker, "fifo", f"a{i}".encode(), message_group="A")
        await send(broker, "fifo", f"b{i}".encode(), message_group="B")
    seen: dict[str, list[bytes]] = {"A": [], "B": []}
    for _ in range(3):
        got = await receive(broker, "g", "fifo")
        groups = [v.message_group for v in got]
        assert len(groups) == len(set(groups)), "two messages of one group in flight at once"
        for view in got:
            assert view.message_group is not None and view.receipt_handle is not None
            seen[view.message_group].append(view.body)
            broker.ack(group="g", receipt_handle=view.receipt_handle)
    assert seen == {"A": [b"a0", b"a1", b"a2"], "B": [b"b0", b"b1", b"b2"]}


async def test_delay_level_delivered_when_due_not_before(broker: Broker, clock: FakeClock) -> None:
    await send(broker, "d", b"later", delay_level=2)  # 5 s
    await broker.tick(clock.now_ms())
    assert await receive(broker, "g", "d") == []
    clock.advance(4_999)
    await broker.tick(clock.now_ms())
    assert await receive(broker, "g", "d") == []
    clock.advance(1)
    await broker.tick(clock.now_ms())
    assert [v.body for v in await receive(broker, "g", "d")] == [b"later"]


async def test_delivery_timestamp_survives_restart(tmp_path: Path, clock: FakeClock) -> None:
    config = make_config(tmp_path)
    broker = await Broker.open(config, clock=clock)
    deliver = clock.now_ms() + 90_000
    await send(broker, "d", b"at", delivery_timestamp_ms=deliver)
    await send(broker, "d", b"sooner", delivery_timestamp_ms=clock.now_ms() + 30_000)
    await broker.close()
    clock.advance(45_000)
    broker = await Broker.open(config, clock=clock)
    try:
        await broker.tick(clock.now_ms())
        assert await receive_acked(broker, "g", "d") == [b"sooner"]
        clock.set(deliver - 1)
        await broker.tick(clock.now_ms())
        assert await receive_acked(broker, "g", "d") == []
        clock.set(deliver)
        await broker.tick(clock.now_ms())
        assert await receive_acked(broker, "g", "d") == [b"at"]
    finally:
        await broker.close()


async def test_recall_cancels_a_delayed_message(broker: Broker, clock: FakeClock) -> None:
    results = await broker.send(
        [Message(topic="d", body=b"x", delivery_timestamp_ms=clock.now_ms() + 10_000)], CTX
    )
    handle = results[0].recall_handle
    assert handle is not None
    assert await broker.recall("d", handle) == results[0].message_id
    clock.advance(20_000)
    await broker.tick(clock.now_ms())
    assert await receive(broker, "g", "d") == []


async def test_a_recall_repeats_but_comes_too_late_with_an_error(broker: Broker, clock: FakeClock) -> None:
    """A recall after delivery answered MESSAGE_NOT_FOUND, which the official clients take for an empty
    success (Python returned the id ''); a repeated recall failed although the message stays recalled."""
    (soon,) = await broker.send(
        [Message(topic="d", body=b"soon", delivery_timestamp_ms=clock.now_ms() + 1_000)], CTX
    )
    (later,) = await broker.send(
        [Message(topic="d", body=b"later", delivery_timestamp_ms=clock.now_ms() + 60_000)], CTX
    )
    assert soon.recall_handle is not None and later.recall_handle is not None
    assert await broker.recall("d", later.recall_handle) == later.message_id
    assert await broker.recall("d", later.recall_handle) == later.message_id
    clock.advance(1_000)
    await broker.tick(clock.now_ms())
    with pytest.raises(errors.NotFound) as raised:
        await broker.recall("d", soon.recall_handle)
    assert raised.value.code == errors.NOT_FOUND and "already delivered" in raised.value.message


async def test_batch_is_atomic_and_rejects_mixed_topics(broker: Broker) -> None:
    results = await broker.send([Message(topic="b", body=b"1"), Message(topic="b", body=b"2")], CTX)
    assert len(results) == 2
    with pytest.raises(errors.InvalidArgument):
        await broker.send([Message(topic="b", body=b"1"), Message(topic="c", body=b"2")], CTX)
    with pytest.raises(errors.InvalidArgument, match="transactional"):
        await broker.send([Message(topic="b", body=b"1", transactional=True)] * 2, CTX)


async def test_explicit_queue_and_offsets(broker: Broker) -> None:
    broker.topics.create("q", queues=4)
    for i in range(5):
        await broker.send([Message(topic="q", body=bytes([i]))], SendContext(queue_id=2))
    assert broker.query_offset("q", 2, OffsetPolicy.END) == 5
    assert broker.query_offset("q", 1, OffsetPolicy.END) == 0
    pulled = await broker.pull(group="pg", topic="q", queue_id=2, offset=1, batch_size=10)
    assert [v.body for v in pulled.messages] == [bytes([i]) for i in range(1, 5)]
    assert pulled.next_offset == 5
    broker.update_offset("pg", "q", 2, 5)
    assert broker.get_offset("pg", "q", 2) == 5
    with pytest.raises(errors.InvalidArgument):
        await broker.send([Message(topic="q", body=b"x")], SendContext(queue_id=9))


async def test_invalid_input_is_rejected(broker: Broker) -> None:
    with pytest.raises(errors.InvalidTopic):
        await send(broker, "bad topic!", b"x")
    with pytest.raises(errors.InvalidTopic):
        await send(broker, names.HALF_TOPIC, b"x")
    with pytest.raises(errors.MessageBodyEmpty):
        await send(broker, "t", b"")
    with pytest.raises(errors.MessageTooLarge):
        await send(broker, "t", b"x" * (4 * 1024 * 1024 + 1))
    with pytest.raises(errors.InvalidDeliveryTime):
        await send(broker, "t", b"x", delivery_timestamp_ms=broker.clock.now_ms() + 4 * 86_400_000)


async def test_one_requests_messages_share_a_queue_and_fifo_groups_keep_theirs(broker: Broker) -> None:
    # the Apache proxy picks one queue per SendMessage and sends its messages there as one batch;
    # a FIFO message group always keeps its own queue (by hash), whatever request it came in
    broker.topics.create("rr", queues=4)
    general = [
        {
            r.queue.queue_id
            for r in await broker.send([Message(topic="rr", body=b"x%d" % i) for i in range(6)], CTX)
        }
        for _ in range(3)
    ]
    lane = [
        {
            r.queue.queue_id
            for r in await broker.send_lean(
                "rr", [LeanMessage(b"y%d" % i, {}, None, (), None, None) for i in range(6)], CTX
            )
        }
        for _ in range(2)
    ]
    assert [len(queues) for queues in general + lane] == [1] * 5
    assert len(set().union(*general, *lane)) == 4  # the next request takes the next queue
    mixed = await broker.send_lean(
        "rr", [LeanMessage(b"z", {}, None, (), None, g) for g in (None, "g1", None, "g2")], CTX
    )
    assert mixed[0].queue.queue_id == mixed[2].queue.queue_id
    assert [mixed[1].queue.queue_id, mixed[3].queue.queue_id] == [
        fifo_queue_of("g1", 4),
        fifo_queue_of("g2", 4),
    ]
