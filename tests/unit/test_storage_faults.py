"""Disk full, write and fsync failures: a clear error, a fenced store when durability is in doubt,
nothing acknowledged lost, nothing half-written."""

from __future__ import annotations

import errno
import math

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import DiskFull, StoreFenced
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

DATA = "/data"


def _config(mode: FlushMode = FlushMode.SYNC, prealloc_bytes: int = 0) -> StoreConfig:
    """Files grow by appends unless ``prealloc_bytes`` (then appends take no new space: ENOSPC comes
    only from preparing ahead, see the preallocation tests)."""
    return StoreConfig(data_dir=DATA, segment_bytes=64 * 1024, flush_mode=mode, prealloc_bytes=prealloc_bytes)


def _req(i: int) -> PutRequest:
    return PutRequest("T", 0, b"m%05d" % i + b"x" * 200)


def _bodies(store: MessageStore) -> list[bytes]:
    read = store.read_queue("T", 0, 0, 1000)
    return [r.body for r in read.records]


def _snapshot(fs: FaultyFileSystem) -> dict[str, bytes]:
    return {path: bytes(f.data) for path, f in fs.files.items()}


async def test_disk_full_fails_the_write_cleanly_and_the_store_resumes() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    await store.start()
    acked = [await store.put(_req(i)) for i in range(5)]
    before = _snapshot(fs)
    fs.set_space_left(100)  # less than one record
    with pytest.raises(DiskFull, match="nothing was written"):
        await store.put(_req(5))
    with pytest.raises(DiskFull):
        await store.put_batch([_req(6), _req(7)])
    assert _snapshot(fs) == before, "no partial record remains"
    assert not store.fenced
    fs.set_space_left(None)
    acked.append(await store.put(_req(8)))
    assert acked[-1].queue_offset == 5, "a failed write consumes no queue offset"
    await store.close()
    fs.lose_unfsynced()
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert _bodies(reopened) == [_req(i).body for i in (0, 1, 2, 3, 4, 8)]


# The started store fsyncs on the loop's thread while fsyncs are fast, else in a worker thread.
SYNC_PATHS = pytest.mark.parametrize("inline_sync_us_max", [math.inf, -1.0], ids=["inline", "thread"])


@SYNC_PATHS
async def test_failed_fsync_fences_the_store_and_never_acknowledges(inline_sync_us_max: float) -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    store.inline_sync_us_max = inline_sync_us_max
    await store.start()
    acked = [await store.put(_req(i)) for i in range(3)]
    fs.fail_next_sync(errno.EIO)
    with pytest.raises(StoreFenced, match="fsync failed"):
        await store.put(_req(3))
    assert store.fenced
    assert "fsync failed" in (store.fence_reason or "")
    syncs = fs.syncs
    with pytest.raises(StoreFenced):
        await store.put(_req(4))
    with pytest.raises(StoreFenced):
        store.flush()
    assert fs.syncs == syncs, "fsync is never retried after a failure"
    assert store.max_offset("T", 0) == 3, "the unflushed record never became visible"
    await store.close()
    fs.lose_unfsynced()
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert _bodies(reopened)[:3] == [_req(i).body for i in range(3)]
    assert len(acked) == 3


async def test_write_error_fences_and_leaves_no_half_record() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    await store.start()
    await store.put(_req(0))
    before = _snapshot(fs)
    fs.fail_next_write(errno.EIO)
    with pytest.raises(StoreFenced, match="write to"):
        await store.put(_req(1))
    assert _snapshot(fs) == before
    with pytest.raises(StoreFenced):
        await store.put(_req(2))
    await store.close()


async def test_concurrent_waiters_all_fail_when_their_fsync_fails() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    pending = [store.put_nowait(_req(i))[1] for i in range(10)]
    fs.fail_next_sync()
    with pytest.raises(StoreFenced):
        store.flush()
    for durable in pending:
        with pytest.raises(StoreFenced):
            await durable
    await store.close()


@SYNC_PATHS
async def test_a_failed_group_fsync_fails_every_waiter_of_the_started_store(
    inline_sync_us_max: float,
) -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    store.inline_sync_us_max = inline_sync_us_max
    await store.start()
    await store.put(_req(0))
    syncs = fs.syncs
    fs.fail_next_sync()
    pending = [store.put_nowait(_req(i))[1] for i in range(1, 11)]  # one group, one fsync
    for durable in pending:
        with pytest.raises(StoreFenced, match="fsync failed"):
            await durable
    assert fs.syncs == syncs + 1, "one fsync for the group, never retried"
    assert store.max_offset("T", 0) == 1, "nothing of the failed group became visible"
    with pytest.raises(StoreFenced):
        store.put_nowait(_req(11))
    await store.close()


async def test_async_mode_acks_after_write_and_loses_at_most_the_unflushed_window() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(FlushMode.ASYNC), fs=fs, clock=FakeClock())
    for i in range(4):
        _, durable = store.put_nowait(_req(i))
        await durable
    store.run_once()
    assert store.max_offset("T", 0) == 4, "ASYNC mode shows records right after the write"
    store.flush()
    for i in range(4, 6):
        store.put_nowait(_req(i))
    fs.lose_unfsynced()
    reopened = MessageStore.open(_config(FlushMode.ASYNC), fs=fs, clock=FakeClock())
    assert _bodies(reopened) == [_req(i).body for i in range(4)], "a prefix survives, no gap"


async def test_disk_full_fails_a_whole_group_and_its_queue_offsets_are_reused() -> None:
    """Appends are written once per group: ENOSPC fails every append of that group (none acked, none
    in the file), and the group's queue offsets go to the next appends."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    await store.start()
    await store.put(_req(0))
    before = _snapshot(fs)
    fs.set_space_left(500)  # room for one record of the group, not for the group
    group = [store.put_nowait(_req(i))[1] for i in range(1, 4)]
    for durable in group:
        with pytest.raises(DiskFull):
            await durable
    assert _snapshot(fs) == before, "no record of the failed group reached the file"
    fs.set_space_left(None)
    assert (await store.put(_req(4))).queue_offset == 1
    assert _bodies(store) == [_req(0).body, _req(4).body]
    await store.close()


async def test_async_mode_serves_only_written_records() -> None:
    """ASYNC acks after the group's write (at the end of the loop turn); nothing buffered is readable."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(FlushMode.ASYNC), fs=fs, clock=FakeClock())
    pending = [store.put_nowait(_req(i))[1] for i in range(3)]
    assert store.max_offset("T", 0) == 0, "buffered, not yet written: invisible"
    assert fs.read_file(f"{DATA}/commitlog/{0:020d}") == b""
    for durable in pending:
        await durable
    assert _bodies(store) == [_req(i).body for i in range(3)]
    await store.close()
