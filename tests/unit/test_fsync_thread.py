"""A SYNC group whose fsync leaves the loop goes to the store's own fsync thread (a C-level queue in,
one call_soon_threadsafe back) rather than through run_in_executor; the rules are those of the executor:
ack only after the fdatasync returned, a failed one fences and fails every waiter, close waits for it."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import StoreFenced
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore


class ThreadRecordingFileSystem(FaultyFileSystem):
    def __init__(self) -> None:
        super().__init__()
        self.sync_threads: list[str] = []
        self.fail_syncs = False

    def before_sync(self) -> None:
        self.sync_threads.append(threading.current_thread().name)
        if self.fail_syncs:
            raise OSError(5, "injected fsync error")
        super().before_sync()


def _store(fs: FaultyFileSystem) -> MessageStore:
    config = StoreConfig(data_dir="/d", segment_bytes=1 << 20, checkpoint_interval_ms=3_600_000)
    return MessageStore.open(config, fs=fs, clock=FakeClock())


async def test_fsyncs_off_the_loop_run_on_the_stores_fsync_thread_which_ends_at_close() -> None:
    fs = ThreadRecordingFileSystem()
    store = _store(fs)
    await store.start()
    store._commit.inline_sync_us_max = -1.0  # every fsync off the loop
    try:
        await store.put(PutRequest("T", 0, b"first"))
        fs.sync_threads.clear()
        for round_ in range(3):
            results = await asyncio.gather(*(store.put(PutRequest("T", 0, b"m%d" % i)) for i in range(4)))
            assert [r.queue_offset for r in results] == [1 + 4 * round_ + i for i in range(4)]
        assert fs.sync_threads and set(fs.sync_threads) == {"txmq-fsync"}
        assert store.read_queue("T", 0, 0, 32).records[-1].body == b"m3"  # dispatched before the ack
        thread = next(t for t in threading.enumerate() if t.name == "txmq-fsync")
    finally:
        await store.close()
    thread.join(10)
    assert not thread.is_alive()


async def test_a_failed_fsync_on_the_thread_fences_and_fails_every_waiter() -> None:
    fs = ThreadRecordingFileSystem()
    store = _store(fs)
    await store.start()
    store._commit.inline_sync_us_max = -1.0
    try:
        await store.put(PutRequest("T", 0, b"first"))
        fs.fail_syncs = True
        outcomes = await asyncio.gather(
            *(store.put(PutRequest("T", 0, b"m%d" % i)) for i in range(3)), return_exceptions=True
        )
        assert all(isinstance(o, StoreFenced) for o in outcomes)
        assert "txmq-fsync" in fs.sync_threads
        fs.fail_syncs = False
        with pytest.raises(StoreFenced):  # never retried: the store stays fenced
            await store.put(PutRequest("T", 0, b"later"))
    finally:
        await store.close()


class PrepareRecordingFileSystem(ThreadRecordingFileSystem):
    """Can fail the fsyncs that run on the fsync thread (the zero-fills', when the groups' fsyncs run
    inline on the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_thread_syncs: OSError | None = None

    def before_sync(self) -> None:
        if self.fail_thread_syncs is not None and threading.current_thread().name == "txmq-fsync":
            raise self.fail_thread_syncs
        super().before_sync()


def _prealloc_store(fs: FaultyFileSystem) -> MessageStore:
    config = StoreConfig(data_dir="/d", segment_bytes=1 << 20, prealloc_bytes=4096,
                         checkpoint_interval_ms=3_600_000)  # fmt: skip
    return MessageStore.open(config, fs=fs, clock=FakeClock())


async def test_zero_filling_ahead_runs_on_the_fsync_thread_not_in_the_default_executor() -> None:
    fs = PrepareRecordingFileSystem()
    store = _prealloc_store(fs)
    await store.start()
    store._commit.inline_sync_us_max = math.inf  # the groups' fsyncs on the loop: only zero-fills leave it
    loop_thread = threading.current_thread().name
    try:
        fs.sync_threads.clear()
        for i in range(60):  # ~13 KiB of records over 4 KiB steps: several zero-fills
            await store.put(PutRequest("T", 0, b"m%03d" % i + b"x" * 200))
        off_loop = [name for name in fs.sync_threads if name != loop_thread]
        assert len(off_loop) >= 3, fs.sync_threads
        assert set(off_loop) == {"txmq-fsync"}, "no zero-fill goes through run_in_executor"
        thread = next(t for t in threading.enumerate() if t.name == "txmq-fsync")
    finally:
        await store.close()
    thread.join(10)
    assert not thread.is_alive()
    reopened = _prealloc_store(fs)
    assert [r.body for r in reopened.read_queue("T", 0, 0, 100).records] == [
        b"m%03d" % i + b"x" * 200 for i in range(60)
    ]


async def test_a_failed_zero_fill_fsync_on_the_thread_fences_the_store() -> None:
    fs = PrepareRecordingFileSystem()
    store = _prealloc_store(fs)
    await store.start()
    store._commit.inline_sync_us_max = math.inf
    try:
        fs.fail_thread_syncs = OSError(5, "injected fsync error")
        outcomes: list[object] = []
        for i in range(60):  # the first zero-fill due fails: fenced, never retried
            try:
                outcomes.append(await store.put(PutRequest("T", 0, b"m%03d" % i + b"x" * 200)))
            except StoreFenced as exc:
                outcomes.append(exc)
        acked = next(i for i, outcome in enumerate(outcomes) if isinstance(outcome, StoreFenced))
        assert 0 < acked < 60
        assert all(isinstance(outcome, StoreFenced) for outcome in outcomes[acked:])
        assert store.fenced and "preparing" in (store._log.fence_reason or "")
        fs.fail_thread_syncs = None
        with pytest.raises(StoreFenced):
            await store.put(PutRequest("T", 0, b"later"))
    finally:
        await store.close()


async def test_a_full_disk_while_zero_filling_on_the_thread_stops_preparing_and_keeps_serving() -> None:
    fs = PrepareRecordingFileSystem()
    store = _prealloc_store(fs)
    await store.start()
    store._commit.inline_sync_us_max = math.inf
    try:
        fs.set_space_left(6000)  # less than the next 4 KiB step once the first is half used
        results = [await store.put(PutRequest("T", 0, b"m%03d" % i + b"x" * 200)) for i in range(12)]
        assert [r.queue_offset for r in results] == list(range(12))
        assert not store.fenced
        assert store._log.prepare_due() is None, "no more preparing this segment on a full disk"
    finally:
        await store.close()
