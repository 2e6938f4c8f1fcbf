"""Found by the simulation: a delayed message that came due while the disk was full was logged as
"could not be delivered" and skipped (the cursor moved past it): an acknowledged message lost.
Storage errors now leave it due; it is delivered once space is back."""

from __future__ import annotations

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import StorageError
from txmq.common.message import Message
from txmq.storage.fs import FaultyFileSystem

from .helpers import CTX, open_broker


async def _due_while_disk_full(message: Message) -> list[bytes]:
    fs, clock = FaultyFileSystem(), FakeClock()
    broker = await open_broker(fs, clock)
    await broker.send([message], CTX)
    clock.advance(3_000)
    fs.set_space_left(0)
    with pytest.raises(StorageError):  # run_background logs it and runs the step again
        await broker.tick(clock.now_ms())
    fs.set_space_left(None)
    clock.advance(1_000)
    await broker.tick(clock.now_ms())
    got = await broker.receive(
        group="g", topic="d", expression="*", batch_size=8, invisible_ms=10_000, long_poll_ms=0
    )
    await broker.close()
    return [v.body for v in got]


async def test_delay_level_message_due_during_disk_full_is_delivered_later() -> None:
    assert await _due_while_disk_full(Message(topic="d", body=b"level", delay_level=1)) == [b"level"]


async def test_timestamp_message_due_during_disk_full_is_delivered_later() -> None:
    message = Message(topic="d", body=b"stamp", delivery_timestamp_ms=FakeClock().now_ms() + 1_500)
    assert await _due_while_disk_full(message) == [b"stamp"]
