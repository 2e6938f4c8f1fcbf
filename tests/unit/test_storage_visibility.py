"""With the background tasks running: consumers never see a record before the fsync covering it
has returned (SYNC), and many concurrent appends share one fsync (group commit)."""

from __future__ import annotations

import asyncio
import threading

from txmq.common.clock import FakeClock
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore


class GatedFileSystem(FaultyFileSystem):
    """A FaultyFileSystem whose fsyncs wait for the test to open a gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def before_sync(self) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            self.gate.wait(timeout=30)
        super().before_sync()


async def test_sync_mode_hides_records_until_their_fsync_returns() -> None:
    fs = GatedFileSystem()
    config = StoreConfig(data_dir="/d", segment_bytes=64 * 1024, checkpoint_interval_ms=3_600_000)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    arrivals: list[int] = []
    store.add_arrival_listener(lambda topic, queue_id, next_offset: arrivals.append(next_offset))
    await store.start()
    await store.put(PutRequest("T", 0, b"m0"))  # creates the segment and the ConsumeQueue file
    for _ in range(100):  # (each a directory fsync) before the gate closes
        if store.max_offset("T", 0) == 1:
            break
        await asyncio.sleep(0)
    fs.gate.clear()
    puts = [asyncio.ensure_future(store.put(PutRequest("T", 0, b"m%d" % i))) for i in range(1, 51)]
    await asyncio.get_running_loop().run_in_executor(None, fs.waiting.wait, 30)
    await asyncio.sleep(0)  # let the remaining appenders run while the fsync is blocked
    assert store.max_physical_offset > 0, "records are written"
    assert store.max_offset("T", 0) == 1, "but not visible"
    assert len(store.read_queue("T", 0, 0, 10).records) == 1
    assert not any(p.done() for p in puts), "and not acknowledged"
    assert arrivals == [1]
    syncs_before = fs.syncs
    fs.gate.set()
    results = await asyncio.gather(*puts)
    assert [r.queue_offset for r in results] == list(range(1, 51))
    assert fs.syncs - syncs_before <= 3, "one group commit covers many appends"
    assert store.max_offset("T", 0) == 51
    assert arrivals[-1:] == [51]
    await store.close()


async def test_async_mode_shows_records_after_the_write_and_notifies() -> None:
    fs = FaultyFileSystem()
    config = StoreConfig(data_dir="/d", segment_bytes=64 * 1024, flush_mode=FlushMode.ASYNC)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    arrived = asyncio.Event()
    store.add_arrival_listener(lambda topic, queue_id, next_offset: arrived.set())
    await store.start()
    await store.put(PutRequest("T", 3, b"hello"))
    assert store.flushed_offset == 0, "acknowledged before any fsync"
    await asyncio.wait_for(arrived.wait(), 10)
    assert [r.body for r in store.read_queue("T", 3, 0, 10).records] == [b"hello"]
    await store.close()
    assert store.flushed_offset == store.max_physical_offset, "close flushes"
