"""Found by the simulation (soak seeds 1379 and 2504): a POP message whose invisible time ran out
while the store refused writes (disk full, fenced after an fsync error) was taken out of flight
before its retry copy was stored. The revive failed, the offset was neither in flight nor done, and
no later tick, scan or restart delivered it again: an acknowledged message lost. Now it stays in
flight until its copy is stored, and the next tick revives it."""

from __future__ import annotations

import pytest

from txmq.broker.broker import Broker
from txmq.common.clock import FakeClock
from txmq.common.errors import StorageError
from txmq.common.message import Message
from txmq.storage.fs import FaultyFileSystem

from .helpers import CTX, open_broker


async def _receive(broker: Broker, invisible_ms: int) -> list[bytes]:
    got = await broker.receive(
        group="g", topic="n", expression="*", batch_size=8, invisible_ms=invisible_ms, long_poll_ms=0
    )
    return [v.body for v in got]


async def test_message_expiring_while_the_disk_is_full_is_revived_once_space_is_back() -> None:
    fs, clock = FaultyFileSystem(), FakeClock()
    broker = await open_broker(fs, clock)
    await broker.send([Message(topic="n", body=b"one")], CTX)
    assert await _receive(broker, 10_000) == [b"one"]  # received, never acked
    clock.advance(11_000)
    fs.set_space_left(0)
    with pytest.raises(StorageError):  # the revive's append fails; run_background logs it and runs again
        await broker.pop.tick(clock.now_ms())
    assert broker.pop.inflight_of("g") == 1  # still in flight: nothing was moved
    fs.set_space_left(None)
    clock.advance(1_000)
    await broker.tick(clock.now_ms())
    assert broker.pop.inflight_of("g") == 0
    redelivered: list[bytes] = []
    for _ in range(5):  # the retry copy is consumed with the group's topic
        clock.advance(1_000)
        await broker.tick(clock.now_ms())
        redelivered += await _receive(broker, 10_000)
        if redelivered:
            break
    await broker.close()
    assert redelivered == [b"one"]
