"""PushConsumer over remoting against a real broker: batches, retries, DLQ, order, rebalancing, tags."""

from __future__ import annotations

import collections
import threading

from tests.client.broker import BrokerProcess
from tests.client.conftest import create_topic
from tests.client.helpers import wait_until
from tests.client.test_producer import read_all
from txmq.client import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageView,
    Producer,
    PushConsumer,
    select_by_hash,
)
from txmq.common import names


def consumer(
    broker: BrokerProcess, group: str, topic: str, listener: object, **options: object
) -> PushConsumer:
    options.setdefault("consume_from", ConsumeFrom.FIRST_OFFSET)
    options.setdefault("rebalance_interval_s", 0.5)
    c = PushConsumer(group, broker.namesrv, listener=listener, **options)  # type: ignore[arg-type]
    c.subscribe(topic, str(options.pop("expression", "*")) if "expression" in options else "*")
    return c


async def test_concurrent_consumption_of_everything(broker: BrokerProcess, unique: str) -> None:
    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageView]) -> ConsumeResult:
        with lock:
            seen.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    async with Producer(broker.namesrv) as producer:
        for i in range(40):
            await producer.send(Message(unique, b"%d" % i))
        async with consumer(broker, f"g{unique}", unique, listener):
            await wait_until(lambda: len(seen) >= 40, what="40 messages consumed")
    assert sorted(seen) == sorted(b"%d" % i for i in range(40))


async def test_batches_have_exactly_the_configured_size(broker: BrokerProcess, unique: str) -> None:
    await create_topic(broker, unique, 1)
    sizes: list[int] = []

    async def listener(msgs: list[MessageView]) -> ConsumeResult:
        sizes.append(len(msgs))
        return ConsumeResult.SUCCESS

    async with Producer(broker.namesrv) as producer:
        await producer.send_batch([Message(unique, b"%d" % i) for i in range(40)])
        c = consumer(
            broker, f"g{unique}", unique, listener, consume_message_batch_max_size=8, pull_batch_size=32
        )
        async with c:
            await wait_until(lambda: sum(sizes) >= 40, what="40 messages consumed")
    assert sizes == [8, 8, 8, 8, 8]


async def test_listener_failing_n_times_then_succeeding(broker: BrokerProcess, unique: str) -> None:
    attempts: collections.Counter[bytes] = collections.Counter()
    reconsume: dict[bytes, list[int]] = collections.defaultdict(list)

    def listener(msgs: list[MessageView]) -> ConsumeResult:
        for m in msgs:
            attempts[m.body] += 1
            reconsume[m.body].append(m.reconsume_times)
        return ConsumeResult.SUCCESS if attempts[msgs[0].body] > 2 else ConsumeResult.RECONSUME_LATER

    async with Producer(broker.namesrv) as producer:
        await producer.send(Message(unique, b"flaky", tags="t"))
        async with consumer(broker, f"g{unique}", unique, listener, max_reconsume_times=5):
            await wait_until(lambda: attempts[b"flaky"] >= 3, what="three attempts")
    assert attempts[b"flaky"] == 3
    assert reconsume[b"flaky"] == [0, 1, 2]


async def test_dead_letter_queue_after_max_reconsume_times(broker: BrokerProcess, unique: str) -> None:
    attempts: list[int] = []

    def listener(msgs: list[MessageView]) -> ConsumeResult:
        attempts.extend(m.reconsume_times for m in msgs)
        raise RuntimeError("poison message")

    group = f"g{unique}"
    async with Producer(broker.namesrv) as producer:
        sent = await producer.send(Message(unique, b"poison"))
        async with consumer(broker, group, unique, listener, max_reconsume_times=2):
            dead = await read_all(broker, names.dlq_topic(group), 1)
    assert attempts == [0, 1, 2]
    assert [m.body for m in dead] == [b"poison"]
    assert dead[0].message_id == sent.message_id


async def test_global_order_orderly_consumer(broker: BrokerProcess, unique: str) -> None:
    await create_topic(broker, unique, 1)
    seen: list[bytes] = []
    failed_once: set[bytes] = set()

    def listener(msgs: list[MessageView]) -> ConsumeResult:
        body = msgs[0].body
        if body == b"007" and body not in failed_once:
            failed_once.add(body)  # local retry must not let 008 overtake 007
            return ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        seen.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    async with Producer(broker.namesrv) as producer:
        for i in range(20):
            await producer.send(Message(unique, b"%03d" % i))
        c = consumer(
            broker, f"g{unique}", unique, listener, orderly=True, suspend_interval_s=0.1, consume_threads=4
        )
        async with c:
            await wait_until(lambda: len(seen) >= 20, what="20 messages consumed")
    assert seen == [b"%03d" % i for i in range(20)]


async def test_partition_order_across_two_orderly_consumers_and_a_rebalance(
    broker: BrokerProcess, unique: str
) -> None:
    group = f"g{unique}"
    seen: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
    lock = threading.Lock()

    def listener_for(name: str):  # type: ignore[no-untyped-def]
        def listener(msgs: list[MessageView]) -> ConsumeResult:
            with lock:
                for m in msgs:
                    key, seq = m.body.decode().split(":")
                    seen[name].append((int(key), int(seq)))
            return ConsumeResult.SUCCESS

        return listener

    def per_key() -> dict[int, list[int]]:
        merged: dict[int, list[int]] = collections.defaultdict(list)
        with lock:
            for name in ("a", "b"):
                for key, seq in seen[name]:
                    merged[key].append(seq)
        return merged

    async with Producer(broker.namesrv) as producer:

        async def send_round(seqs: range) -> None:
            for seq in seqs:
                for key in range(8):
                    await producer.send(
                        Message(unique, b"%d:%d" % (key, seq)), selector=select_by_hash, arg=key
                    )

        await send_round(range(10))
        first = consumer(broker, group, unique, listener_for("a"), orderly=True)
        async with first:
            await wait_until(lambda: len(seen["a"]) >= 80, what="consumer a drained round one")
            second = consumer(broker, group, unique, listener_for("b"), orderly=True)
            async with second:
                await wait_until(
                    lambda: len(first.assigned_queues) == 2 and len(second.assigned_queues) == 2,
                    what="queues rebalanced 2 + 2",
                )
                await send_round(range(10, 20))
                await wait_until(lambda: sum(len(v) for v in per_key().values()) >= 160, what="all consumed")
    merged = per_key()
    for key in range(8):
        order = list(merged[key])
        assert sorted(set(order)) == list(range(20)), (key, order)
        firsts = list(dict.fromkeys(order))  # order of first sightings
        assert firsts == list(range(20)), (key, order)
    assert seen["b"], "the second consumer took over some queues"


async def test_tag_expression_filters(broker: BrokerProcess, unique: str) -> None:
    seen: list[str | None] = []

    def listener(msgs: list[MessageView]) -> ConsumeResult:
        seen.extend(m.tags for m in msgs)
        return ConsumeResult.SUCCESS

    async with Producer(broker.namesrv) as producer:
        for tag in ("a", "b", "c", "a", "d"):
            await producer.send(Message(unique, tag.encode(), tags=tag))
        c = PushConsumer(
            f"g{unique}", broker.namesrv, listener=listener, consume_from=ConsumeFrom.FIRST_OFFSET
        )
        c.subscribe(unique, "a || c")
        async with c:
            await wait_until(lambda: len(seen) >= 3, what="three matching messages")
    assert sorted(t or "" for t in seen) == ["a", "a", "c"]


async def test_last_offset_consumer_gets_what_is_sent_after_start(broker: BrokerProcess, unique: str) -> None:
    """consume_from=LAST_OFFSET on a new group: start() settles the start offsets of its first
    assignment, so messages sent right after it returns are consumed, on every queue, while what was
    sent before start() is not."""
    await create_topic(broker, unique, 4)
    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageView]) -> ConsumeResult:
        with lock:
            seen.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    async with Producer(broker.namesrv) as producer:
        for i in range(8):
            await producer.send(Message(unique, b"old%d" % i))
        c = consumer(broker, f"g{unique}", unique, listener, consume_from=ConsumeFrom.LAST_OFFSET)
        async with c:
            for i in range(8):  # round robin: two on each of the four queues
                await producer.send(Message(unique, b"new%d" % i))
            await wait_until(lambda: len(seen) >= 8, what="8 messages consumed")
    assert sorted(seen) == sorted(b"new%d" % i for i in range(8))
