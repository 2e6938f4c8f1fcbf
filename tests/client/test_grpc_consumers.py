"""SimpleConsumer, PullConsumer and the POP-based PushConsumer over gRPC, against a real broker."""

from __future__ import annotations

import collections

from tests.client.broker import BrokerProcess
from tests.client.grpc_helpers import create_typed_topic
from tests.client.helpers import wait_until
from txmq.client import (
    ConsumeResult,
    Message,
    MessageView,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)


async def send_all(broker: BrokerProcess, messages: list[Message]) -> list[str]:
    async with Producer(broker.grpc, transport="grpc") as producer:
        return [(await producer.send(m)).message_id for m in messages]


async def test_simple_consumer_receive_change_invisible_ack(broker: BrokerProcess, unique: str) -> None:
    [sent] = await send_all(broker, [Message(unique, b"one")])
    async with SimpleConsumer(f"g{unique}", broker.grpc, subscriptions={unique: "*"}) as consumer:
        [first] = await consumer.receive(4, 30, wait_s=3)
        assert (first.message_id, first.delivery_attempt) == (sent, 1)
        await consumer.change_invisible_duration(first, 1)  # back in 1 s instead of 30
        again: list[MessageView] = []
        while not again:
            again = await consumer.receive(4, 30, wait_s=3)
        assert (again[0].message_id, again[0].delivery_attempt) == (sent, 2)
        renewed = await consumer.change_invisible_duration(again[0], 30)
        assert renewed.receipt_handle != again[0].receipt_handle
        await consumer.ack(renewed)
        assert await consumer.receive(4, 30, wait_s=0.5) == []


async def test_pull_consumer_offsets(broker: BrokerProcess, unique: str) -> None:
    ids = await send_all(broker, [Message(unique, f"m{i}".encode()) for i in range(6)])
    group = f"p{unique}"
    async with PullConsumer(group, broker.grpc, transport="grpc") as consumer:
        queues = await consumer.queues(unique)
        consumer.assign(queues)
        await consumer.seek_to_beginning()
        got: list[MessageView] = []
        while len(got) < 6:
            batch = await consumer.poll(timeout_s=2, max_messages=2)
            assert batch, "poll returned nothing before every message arrived"
            got += batch
        await consumer.commit()
        committed = {mq: await consumer.committed(mq) for mq in queues}
    assert sorted(m.message_id for m in got) == sorted(ids)
    per_queue = collections.Counter(m.queue_id for m in got)
    assert {mq.queue_id: off for mq, off in committed.items()} == {
        mq.queue_id: per_queue.get(mq.queue_id, 0) for mq in queues
    }
    [extra] = await send_all(broker, [Message(unique, b"after")])
    async with PullConsumer(group, broker.grpc, transport="grpc") as resumed:
        resumed.assign(queues)
        assert [m.message_id for m in await resumed.poll(timeout_s=3)] == [extra]


async def test_push_consumer_retries_then_dead_letters(broker: BrokerProcess, unique: str) -> None:
    calls: collections.Counter[bytes] = collections.Counter()
    sizes: list[int] = []

    def listener(messages: list[MessageView]) -> ConsumeResult:
        sizes.append(len(messages))
        for m in messages:
            calls[m.body] += 1
        if any(m.body == b"poison" or (m.body == b"flaky" and m.delivery_attempt == 1) for m in messages):
            return ConsumeResult.RECONSUME_LATER
        return ConsumeResult.SUCCESS

    group = f"push{unique}"
    consumer = PushConsumer(group, broker.grpc, transport="grpc", listener=listener, max_reconsume_times=1)
    consumer.subscribe(unique)
    async with consumer:
        await send_all(
            broker, [Message(unique, b"ok"), Message(unique, b"flaky"), Message(unique, b"poison")]
        )
        await wait_until(lambda: calls[b"poison"] >= 2 and calls[b"flaky"] >= 2, 60, "two deliveries")
    # close() waited for the listener calls in progress: the poison message is in the DLQ now
    assert calls[b"ok"] == 1 and calls[b"flaky"] == 2
    assert set(sizes) == {1}
    async with PullConsumer(f"dlq{unique}", broker.grpc, transport="grpc") as dlq:
        dlq.assign(await dlq.queues(f"%DLQ%{group}"))
        await dlq.seek_to_beginning()
        dead = await dlq.poll(timeout_s=3)
    assert [m.body for m in dead] == [b"poison"]


async def test_orderly_push_consumer_keeps_group_order(broker: BrokerProcess, unique: str) -> None:
    create_typed_topic(broker, unique, "FIFO")
    seen: dict[str, list[int]] = collections.defaultdict(list)
    failed_once: set[int] = set()

    def listener(messages: list[MessageView]) -> ConsumeResult:
        for m in messages:
            n = int(m.body)
            if n % 5 == 2 and n not in failed_once:
                failed_once.add(n)
                return ConsumeResult.RECONSUME_LATER
            assert m.message_group is not None
            seen[m.message_group].append(n)
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        f"o{unique}", broker.grpc, transport="grpc", listener=listener, orderly=True,
        suspend_interval_s=0.05,
    )  # fmt: skip
    consumer.subscribe(unique)
    async with consumer:
        await send_all(
            broker, [Message(unique, str(i).encode(), message_group=f"g{i % 3}") for i in range(15)]
        )
        await wait_until(lambda: sum(map(len, seen.values())) >= 15, 60, "every message")
    assert dict(seen) == {f"g{k}": [i for i in range(15) if i % 3 == k] for k in range(3)}
    assert failed_once
