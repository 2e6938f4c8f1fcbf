"""With the background tasks running: consumers never see a record before the fsync covering it
has returned (SYNC), and many concurrent appends share one fsync (group commit)."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable

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
    store.inline_sync_us_max = -1  # fsync in a thread, so the loop runs while the gate is closed
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


class WatchedFileSystem(FaultyFileSystem):
    """Records, at each fsync, what the store shows and how many appends are acknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int]] = []  # (visible queue offset, acknowledged puts)
        self.watch: Callable[[], tuple[int, int]] | None = None

    def before_sync(self) -> None:
        if self.watch is not None:
            self.seen.append(self.watch())
        super().before_sync()


async def test_sync_mode_inline_fsync_shows_and_acknowledges_only_after_it_returns() -> None:
    fs = WatchedFileSystem()
    config = StoreConfig(data_dir="/d", segment_bytes=64 * 1024, checkpoint_interval_ms=3_600_000)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    store.inline_sync_us_max = math.inf  # always on the loop's thread
    await store.start()
    await store.put(PutRequest("T", 0, b"m0"))
    puts = [asyncio.ensure_future(store.put(PutRequest("T", 0, b"m%d" % i))) for i in range(1, 51)]
    fs.watch = lambda: (store.max_offset("T", 0), sum(p.done() for p in puts))
    syncs_before = fs.syncs
    results = await asyncio.gather(*puts)
    assert [r.queue_offset for r in results] == list(range(1, 51))
    assert fs.seen and all(seen == (1, 0) for seen in fs.seen), "hidden and unacknowledged at fsync"
    assert fs.syncs - syncs_before <= 3, "one group commit covers the appends of one loop turn"
    assert store.max_offset("T", 0) == 51
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


async def test_sync_mode_producers_arriving_over_several_turns_share_fsyncs() -> None:
    """Four producers, one append in flight each, whose next appends come 0-2 loop turns apart
    (as a request read and its handler task would): the group waits for them, so most fsyncs
    cover several appends; a lone producer's append is flushed at the next turn, one per fsync."""
    fs = FaultyFileSystem()
    config = StoreConfig(data_dir="/d", segment_bytes=1 << 20, checkpoint_interval_ms=3_600_000)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    await store.start()
    rounds = 60

    async def producer(k: int) -> None:
        for i in range(rounds):
            for _ in range((k + i) % 3):
                await asyncio.sleep(0)
            await store.put(PutRequest("T", k, b"p%d-%d" % (k, i)))

    syncs = fs.syncs
    await asyncio.gather(*(producer(k) for k in range(4)))
    shared = 4 * rounds / (fs.syncs - syncs)
    assert shared >= 3, f"{shared:.2f} appends per fsync (2.3 without waiting for company)"
    assert [store.max_offset("T", k) for k in range(4)] == [rounds] * 4
    syncs = fs.syncs
    for i in range(20):
        await store.put(PutRequest("T", 0, b"lone-%d" % i))
    assert fs.syncs - syncs == 20, "a lone producer never waits for company"
    await store.close()


async def test_a_cancelled_appender_does_not_fail_the_rest_of_its_group() -> None:
    """Cancelling one waiter (a connection closed under its request) leaves the others of its group
    waiting for the same fsync, and they are acknowledged."""
    config = StoreConfig(data_dir="/d", segment_bytes=1 << 20, checkpoint_interval_ms=3_600_000)
    store = MessageStore.open(config, fs=FaultyFileSystem(), clock=FakeClock())
    await store.start()
    puts = [asyncio.ensure_future(store.put(PutRequest("T", 0, b"m%d" % i))) for i in range(3)]
    await asyncio.sleep(0)  # all three appended, one group
    puts[1].cancel()
    results = await asyncio.gather(puts[0], puts[2])
    assert [r.queue_offset for r in results] == [0, 2]
    assert puts[1].cancelled()
    assert store.max_offset("T", 0) == 3, "the cancelled append was written and is durable all the same"
    await store.close()
