"""Where a SYNC group's fsync runs: a lone append on an idle loop fsyncs on the loop's thread even
when the disk has slowed to a few milliseconds per fdatasync (the hop to a worker thread and back cost
more than the fsync itself on a loaded host: grpcpath.md); groups of several appends and busy loops keep
the worker thread."""

from __future__ import annotations

import asyncio
import threading

from txmq.common import limits
from txmq.common.clock import FakeClock
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.flush import sync_inline
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

SLOW_DISK_US = 4_000.0  # fdatasync's average on this host's disk under load (1-4 ms measured)


def test_a_lone_append_on_an_idle_loop_fsyncs_inline_on_a_slow_disk() -> None:
    assert sync_inline(1, SLOW_DISK_US, limits.flush_inline_sync_us_max, busy=0.2)


def test_groups_busy_loops_and_very_slow_disks_keep_the_worker_thread() -> None:
    assert not sync_inline(2, SLOW_DISK_US, limits.flush_inline_sync_us_max, busy=0.2)
    assert not sync_inline(1, SLOW_DISK_US, limits.flush_inline_sync_us_max, busy=0.9)
    assert not sync_inline(1, 50_000.0, limits.flush_inline_sync_us_max, busy=0.2)


class ThreadRecordingFileSystem(FaultyFileSystem):
    def __init__(self) -> None:
        super().__init__()
        self.sync_threads: list[int] = []

    def before_sync(self) -> None:
        self.sync_threads.append(threading.get_ident())
        super().before_sync()


async def test_a_lone_sync_put_with_a_slow_disk_average_does_not_hop_threads() -> None:
    fs = ThreadRecordingFileSystem()
    config = StoreConfig(data_dir="/d", segment_bytes=64 * 1024, checkpoint_interval_ms=3_600_000)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    await store.start()
    try:
        await store.put(PutRequest("T", 0, b"m0"))  # creates the segment and the ConsumeQueue file
        store._commit.sync_ema_us = SLOW_DISK_US
        await asyncio.sleep(0.02)  # the loop idles between two requests of a lone producer (busy ~0)
        fs.sync_threads.clear()
        result = await store.put(PutRequest("T", 0, b"m1"))
        assert result.queue_offset == 1
        assert fs.sync_threads, "the put was fsynced"
        assert set(fs.sync_threads) == {threading.get_ident()}, "on the loop's thread"
    finally:
        await store.close()
