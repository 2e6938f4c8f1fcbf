"""PullConsumer (assign, seek, commit, group subscription) and clients surviving a broker restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.client.broker import FAST_FLAGS, BrokerProcess, require_remoting_server
from tests.client.conftest import create_topic
from tests.client.helpers import wait_until
from txmq.client import (
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageView,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
    Unsupported,
)


async def test_assign_seek_poll_commit(broker: BrokerProcess, unique: str) -> None:
    await create_topic(broker, unique, 2)
    async with Producer(broker.namesrv) as producer:
        for i in range(10):
            await producer.send(
                Message(unique, b"%d" % i),
                queue=(await producer.transport.route(unique, for_write=True))[i % 2],
            )
        middle = int(time.time() * 1000)
    group = f"g{unique}"
    async with PullConsumer(group, broker.namesrv) as consumer:
        queues = await consumer.queues(unique)
        consumer.assign(queues)
        assert [await consumer.position(q) for q in queues] == [5, 5]  # LAST_OFFSET for a new group
        await consumer.seek_to_beginning()
        got: list[MessageView] = []
        while batch := await consumer.poll(timeout_s=0.2):
            got += batch
        assert sorted(m.body for m in got) == sorted(b"%d" % i for i in range(10))
        await consumer.commit()
        assert [await consumer.committed(q) for q in queues] == [5, 5]
        await consumer.seek_to_timestamp(middle + 60_000)
        assert [await consumer.position(q) for q in queues] == [5, 5]
        consumer.seek(queues[0], 3)
        assert [m.queue_offset for m in await consumer.pull(queues[0])] == [3, 4]
        await consumer.seek_to_end()
        assert await consumer.poll(timeout_s=0.1) == []
    async with PullConsumer(group, broker.namesrv) as again:
        await again.subscribe(unique)
        assert sorted(again.assignment(), key=lambda q: q.queue_id) == queues
        assert await again.position(queues[0]) == 5  # the committed offset


async def test_subscribe_settles_last_offset_positions(broker: BrokerProcess, unique: str) -> None:
    """Regression: a new group reading from LAST_OFFSET resolved each queue's end at its first pull,
    so what was sent between subscribe() and the first poll() was skipped. subscribe() now settles
    the positions: what was sent before it is not read, what was sent after it is."""
    await create_topic(broker, unique, 2)
    async with Producer(broker.namesrv) as producer:
        for i in range(4):
            await producer.send(Message(unique, b"old%d" % i))
        async with PullConsumer(f"g{unique}", broker.namesrv) as consumer:
            await consumer.subscribe(unique)
            for i in range(4):  # round robin: two on each queue
                await producer.send(Message(unique, b"new%d" % i))
            got: list[bytes] = []
            while len(got) < 4 and (batch := await consumer.poll(timeout_s=10)):
                got += [m.body for m in batch]
            assert await consumer.poll(timeout_s=0.2) == []
    assert sorted(got) == [b"new0", b"new1", b"new2", b"new3"]


async def test_pop_is_unsupported_over_remoting(broker: BrokerProcess, unique: str) -> None:
    async with SimpleConsumer(f"g{unique}", broker.namesrv, transport="remoting") as consumer:
        await consumer.subscribe(unique)
        with pytest.raises(Unsupported):
            await consumer.receive()


async def test_producer_and_consumer_survive_a_broker_restart(tmp_path: Path, unique: str) -> None:
    require_remoting_server()
    broker = BrokerProcess(tmp_path, *FAST_FLAGS)
    broker.start()
    seen: set[bytes] = set()

    def listener(msgs: list[MessageView]) -> ConsumeResult:
        seen.update(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    try:
        consumer = PushConsumer(
            f"g{unique}", broker.namesrv, listener=listener, consume_from=ConsumeFrom.FIRST_OFFSET,
            rebalance_interval_s=0.5,
        )  # fmt: skip
        consumer.subscribe(unique)
        async with Producer(broker.namesrv, retries=8) as producer, consumer:
            await producer.send(Message(unique, b"before"))
            await wait_until(lambda: b"before" in seen, what="first message consumed")
            broker.restart()
            await producer.send(Message(unique, b"after"))  # reconnects, re-registers, retries
            await wait_until(lambda: b"after" in seen, timeout_s=60, what="message after restart consumed")
    finally:
        broker.stop()
