"""Producer over remoting against a real broker: every send mode, ordering, delays, back-pressure."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.client.broker import BrokerProcess
from tests.client.conftest import create_topic
from tests.client.helpers import wait_until
from txmq.client import (
    ConsumeFrom,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    SendResult,
    SendTimeout,
    select_by_hash,
    split_batches,
)
from txmq.common import errors
from txmq.common.message import MessageView


async def read_all(broker: BrokerProcess, topic: str, count: int, group: str = "reader") -> list[MessageView]:
    """Every message of ``topic`` from the beginning, queue by queue, until ``count`` arrived."""
    got: list[MessageView] = []
    async with PullConsumer(
        group + topic.replace("%", "_"), broker.namesrv, consume_from=ConsumeFrom.FIRST_OFFSET
    ) as consumer:
        consumer.assign(await consumer.queues(topic))
        await consumer.seek_to_beginning()

        async def more() -> None:
            got.extend(await consumer.poll(timeout_s=0.2))

        for _ in range(200):
            if len(got) >= count:
                break
            await more()
    return got


async def test_send_returns_id_queue_and_offset(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv, group=f"pg{unique}") as producer:
        first = await producer.send(Message(unique, b"a", tags="x", keys=("k1",), properties={"p": "1"}))
        second = await producer.send(Message(unique, b"b"), queue=first.queue)
    assert isinstance(first, SendResult)
    assert len(first.message_id) == 34
    assert first.queue.topic == unique
    assert second.queue == first.queue
    assert second.queue_offset == first.queue_offset + 1
    [a, b] = sorted(await read_all(broker, unique, 2), key=lambda m: m.queue_offset)
    assert (a.body, a.tags, a.keys, a.properties.get("p"), a.message_id) == (
        b"a",
        "x",
        ("k1",),
        "1",
        first.message_id,
    )
    assert b.message_id == second.message_id


async def test_send_async_future_and_callback(broker: BrokerProcess, unique: str) -> None:
    seen: list[tuple[SendResult | None, BaseException | None]] = []
    async with Producer(broker.namesrv) as producer:
        futures = [
            await producer.send_async(Message(unique, b"%d" % i), lambda r, e: seen.append((r, e)))
            for i in range(20)
        ]
        results = await asyncio.gather(*futures)
    assert len({r.message_id for r in results}) == 20
    assert len(seen) == 20
    assert all(r is not None and e is None for r, e in seen)


async def test_oneway_sends_arrive(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv) as producer:
        for i in range(10):
            await producer.send_oneway(Message(unique, b"one-%d" % i))
    got = await read_all(broker, unique, 10)
    assert sorted(m.body for m in got) == sorted(b"one-%d" % i for i in range(10))


async def test_batch_is_one_queue_consecutive_offsets(broker: BrokerProcess, unique: str) -> None:
    messages = [Message(unique, b"m%d" % i, keys=(f"k{i}",)) for i in range(50)]
    async with Producer(broker.namesrv) as producer:
        results = await producer.send_batch(messages)
    assert len({r.queue for r in results}) == 1
    assert [r.queue_offset for r in results] == list(
        range(results[0].queue_offset, results[0].queue_offset + 50)
    )
    got = await read_all(broker, unique, 50)
    assert sorted(m.body for m in got) == sorted(m.body for m in messages)


async def test_batch_rules(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv) as producer:
        with pytest.raises(errors.InvalidArgument):
            await producer.send_batch([Message(unique, b"a"), Message(unique + "x", b"b")])
        with pytest.raises(errors.InvalidArgument):
            await producer.send_batch([Message(unique, b"a", delay_level=1)])
        with pytest.raises(errors.PayloadTooLarge):
            await producer.send_batch([Message(unique, b"x" * (3 << 20)), Message(unique, b"y" * (2 << 20))])
        big = [Message(unique, b"z" * (1 << 20)) for _ in range(9)]
        batches = list(split_batches(big))
        assert [len(b) for b in batches] == [3, 3, 3]
        for batch in batches:
            await producer.send_batch(batch)


async def test_batch_checks_every_message(broker: BrokerProcess, unique: str) -> None:
    """A bad message after good ones fails the whole batch with its own error (the SDK's C pass over
    a batch of plain messages declines, the message-by-message checks judge), and nothing is stored;
    a batch of plain messages with a tagged or keyed one among them is sent."""
    bad: list[tuple[Message, type[errors.TxmqError]]] = [
        (Message(unique, b""), errors.MessageBodyEmpty),
        (Message(unique, b"b", keys=("a key",)), errors.InvalidKey),
        (Message(unique, b"b", tags=" t"), errors.InvalidTag),
        (Message(unique, b"b", transactional=True), errors.InvalidArgument),
        (Message(unique, b"b", delay_level=0), errors.InvalidDeliveryTime),
        (Message(unique, b"b", delivery_timestamp_ms=1), errors.InvalidArgument),
        (Message(unique + "x", b"b"), errors.InvalidArgument),
        (Message(unique, b"x" * (4 * 1024 * 1024 + 1)), errors.MessageTooLarge),
    ]
    async with Producer(broker.namesrv) as producer:
        for message, error in bad:
            with pytest.raises(error):
                await producer.send_batch([Message(unique, b"a"), Message(unique, b"a2"), message])
        sent = await producer.send_batch(
            [Message(unique, b"p1"), Message(unique, b"p2", tags="t", keys=("k",)), Message(unique, b"p3")]
        )
    assert [r.queue_offset - sent[0].queue_offset for r in sent] == [0, 1, 2]
    got = await read_all(broker, unique, 3)
    assert sorted(m.body for m in got) == [b"p1", b"p2", b"p3"]


async def test_global_order_with_one_queue(broker: BrokerProcess, unique: str) -> None:
    await create_topic(broker, unique, 1)
    async with Producer(broker.namesrv) as producer:
        for i in range(30):
            await producer.send(Message(unique, b"%03d" % i))
    got = await read_all(broker, unique, 30)
    assert [m.body for m in got] == [b"%03d" % i for i in range(30)]


async def test_selector_keeps_each_key_on_one_queue(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv) as producer:
        results = [
            await producer.send(Message(unique, b"%d:%d" % (key, seq)), selector=select_by_hash, arg=key)
            for seq in range(5)
            for key in range(8)
        ]
        custom = await producer.send(Message(unique, b"c"), selector=lambda qs, m, a: qs[-1], arg=None)
    by_key: dict[int, set[MessageQueue]] = {}
    for result, (_seq, key) in zip(results, [(s, k) for s in range(5) for k in range(8)], strict=True):
        by_key.setdefault(key, set()).add(result.queue)
    assert all(len(queues) == 1 for queues in by_key.values())
    assert len({q for qs in by_key.values() for q in qs}) > 1
    assert custom.queue.queue_id == 3


async def test_message_group_orders_like_a_selector(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv) as producer:
        results = [await producer.send(Message(unique, b"%d" % i, message_group="order-7")) for i in range(5)]
    assert len({r.queue for r in results}) == 1


async def test_delay_level_delivers_later(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv) as producer:
        await producer.send(Message(unique, b"late", delay_level=2))
        with pytest.raises(errors.InvalidDeliveryTime):
            await producer.send(Message(unique, b"x", delay_level=19))
        due_ms = int(time.time() * 1000) + 1_500
        await producer.send(Message(unique, b"timed", delivery_timestamp_ms=due_ms))
    got = await read_all(broker, unique, 2)
    assert sorted(m.body for m in got) == [b"late", b"timed"]
    for message in got:
        assert message.store_timestamp_ms >= message.born_timestamp_ms
        if message.body == b"timed":
            assert message.delivery_timestamp_ms == due_ms
            assert message.store_timestamp_ms >= due_ms, "a timed message was delivered early"


async def test_validation_uses_broker_limits(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv) as producer:
        with pytest.raises(errors.MessageTooLarge):
            await producer.send(Message(unique, b"x" * (4 * 1024 * 1024 + 1)))
        with pytest.raises(errors.InvalidTopic):
            await producer.send(Message("bad topic", b"x"))
        with pytest.raises(errors.MessageBodyEmpty):
            await producer.send(Message(unique, b""))
        with pytest.raises(errors.InvalidArgument):
            await producer.send(Message(unique, b"x", transactional=True))
    with pytest.raises(errors.ClientClosed):
        await producer.send(Message(unique, b"x"))


async def test_back_pressure_when_the_broker_stalls(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv, max_in_flight=4, send_timeout_s=5, retries=0) as producer:
        await producer.send(Message(unique, b"warm"))  # route and connection ready
        broker.pause()
        try:
            futures = [await producer.send_async(Message(unique, b"%d" % i)) for i in range(4)]
            producer.send_timeout_s = 0.5  # the waits below; the four sends in flight keep 5 s
            with pytest.raises(SendTimeout):
                await producer.send_async(Message(unique, b"over"))
            with pytest.raises(SendTimeout):
                await producer.send(Message(unique, b"over"))
            assert producer._window is not None
            assert producer._window.messages == 4
        finally:
            broker.resume()
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
    assert all(isinstance(o, SendResult) for o in outcomes), outcomes
    await wait_until(
        lambda: producer._window is not None and producer._window.messages == 0, what="window drained"
    )


async def test_send_async_in_place_times_out_with_request_timeout(broker: BrokerProcess, unique: str) -> None:
    # once the route and connection are known, send_async's first attempt starts without a task: its
    # timeout must still fire and map to the same error, for the future and the callback alike
    seen: list[tuple[SendResult | None, BaseException | None]] = []
    async with Producer(broker.namesrv, send_timeout_s=0.5, retries=0) as producer:
        await producer.send(Message(unique, b"warm"))
        broker.pause()
        try:
            future = await producer.send_async(Message(unique, b"late"), lambda r, e: seen.append((r, e)))
            with pytest.raises(errors.RequestTimeout):
                await future
        finally:
            broker.resume()
        assert producer._window is not None and producer._window.messages == 0
        assert len(seen) == 1 and seen[0][0] is None and isinstance(seen[0][1], errors.RequestTimeout)


async def test_send_async_retries_an_in_place_attempt_that_lost_its_connection(
    broker: BrokerProcess, unique: str
) -> None:
    async with Producer(broker.namesrv, retries=2) as producer:
        await producer.send(Message(unique, b"warm"))
        futures = [await producer.send_async(Message(unique, b"%d" % i)) for i in range(20)]
        channels = producer.transport._pool.channels()  # type: ignore[attr-defined]
        for channel in channels:
            await channel.close()  # the sends in flight fail with ConnectionError_ (retriable)
        results = await asyncio.gather(*futures)
    # every send was answered by the broker (stored at least once: an attempt written before the
    # close may be stored too)
    assert len({r.message_id for r in results}) == 20
    assert all(r.queue.topic == unique and r.queue_offset >= 0 for r in results)


async def test_send_async_spreads_over_queues_like_send(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.namesrv) as producer:
        await producer.send(Message(unique, b"warm"))
        queues = await producer.transport.route(unique, for_write=True)
        futures = [await producer.send_async(Message(unique, b"%d" % i)) for i in range(4 * len(queues))]
        results = await asyncio.gather(*futures)
    counts = {q: sum(r.queue == q for r in results) for q in queues}
    assert set(counts.values()) == {4}, counts
