"""A delayed message delivered to its topic just before a crash (its copy durable, the delay cursor not
yet saved) was delivered a second time after the restart: the documented kill -9 duplicate. The copy
now names the delayed record it came from, and the restart skips what the log shows delivered."""

from __future__ import annotations

import errno

from txmq.broker.broker import Broker
from txmq.common.clock import FakeClock
from txmq.common.errors import StorageError
from txmq.common.message import Message
from txmq.storage.fs import FaultyFileSystem

from .helpers import CTX, open_broker


async def _bodies(broker: Broker, topic: str) -> list[bytes]:
    got = await broker.receive(
        group="g", topic=topic, expression="*", batch_size=32, invisible_ms=60_000, long_poll_ms=0
    )
    return sorted(v.body for v in got)


async def _crash_after_delivery(messages: list[Message], topic: str) -> list[bytes]:
    fs, clock = FaultyFileSystem(), FakeClock()
    broker = await open_broker(fs, clock)
    for message in messages:
        await broker.send([message], CTX)
    clock.advance(3_000)
    # the copies are written and fsynced; saving the delay cursors fails, then the power goes
    fs.fail_next_write(errno.EIO, path_prefix="/b/config/delay_cursors")
    try:
        await broker.delays.tick(clock.now_ms())
    except StorageError:
        pass
    fs.lose_unfsynced()
    restarted = await open_broker(fs, clock)
    clock.advance(1_000)
    await restarted.tick(clock.now_ms())
    clock.advance(1_000)
    await restarted.tick(clock.now_ms())
    bodies = await _bodies(restarted, topic)
    await restarted.close()
    return bodies


async def test_delay_level_message_is_not_delivered_twice_after_a_crash() -> None:
    messages = [Message(topic="d", body=b"level-%d" % i, delay_level=1) for i in range(3)]
    assert await _crash_after_delivery(messages, "d") == [b"level-0", b"level-1", b"level-2"]


async def test_timestamp_message_is_not_delivered_twice_after_a_crash() -> None:
    due = FakeClock().now_ms() + 1_500
    messages = [Message(topic="t", body=b"stamp-%d" % i, delivery_timestamp_ms=due) for i in range(3)]
    assert await _crash_after_delivery(messages, "t") == [b"stamp-0", b"stamp-1", b"stamp-2"]


async def test_a_message_not_yet_due_at_the_crash_is_delivered_once_after_it() -> None:
    start = FakeClock().now_ms()
    early = Message(topic="m", body=b"early", delivery_timestamp_ms=start + 1_500)
    late = Message(topic="m", body=b"late", delivery_timestamp_ms=start + 4_500)
    assert await _crash_after_delivery([early, late], "m") == [b"early", b"late"]
