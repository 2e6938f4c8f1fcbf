"""Preallocated CommitLog segments: appends write over zeros prepared (and fsynced) ahead, the data
ends at the first zeros, a crash that puts an unsynced group's sectors down in any order loses only
unacknowledged records, and stores whose files end at their data (written without preallocation)
still open and continue."""

from __future__ import annotations

import errno
import math
import posixpath
import random

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import CorruptRecord, DiskFull, StoreFenced
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.checkpoint import Checkpoint, save_checkpoint
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore
from txmq.storage.verify import verify_store

DATA = "/data"
SEGMENT = 64 * 1024
COMMITLOG = posixpath.join(DATA, "commitlog")


def _config(prealloc_bytes: int = 8 * 1024, mode: FlushMode = FlushMode.SYNC) -> StoreConfig:
    return StoreConfig(data_dir=DATA, segment_bytes=SEGMENT, consume_queue_units_per_file=64,
                       prealloc_bytes=prealloc_bytes, flush_mode=mode)  # fmt: skip


def _req(i: int, size: int = 200) -> PutRequest:
    return PutRequest("T", 0, b"m%05d" % i + bytes([1 + i % 255]) * size)


def _bodies(store: MessageStore) -> list[bytes]:
    return [r.body for r in store.read_queue("T", 0, 0, 10_000).records]


def _segments(fs: FaultyFileSystem) -> list[str]:
    return [posixpath.join(COMMITLOG, name) for name in fs.list_dir(COMMITLOG)]


def test_appends_write_over_prepared_zeros_and_the_file_never_grows_with_them() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    (path,) = _segments(fs)
    assert len(fs.read_file(path)) == 8 * 1024, "prepared at open, before the first append"
    assert fs.files[path].durable == bytes(8 * 1024), "zeros, fsynced"
    ends = []
    for i in range(10):
        result, _ = store.put_nowait(_req(i))
        ends.append(result.physical_offset + result.size)
    store._commit.flush_now()  # the group commit alone: no preparing ahead
    data = fs.read_file(path)
    assert len(data) == 8 * 1024, "the appends wrote over the zeros"
    assert not any(data[ends[-1] :])
    segment = store._log.segments.active
    assert segment is not None
    assert len(segment.handle.read_at(0, SEGMENT)) == ends[-1], "reads stop at the end of the data"
    assert _bodies(store) == [_req(i).body for i in range(10)]
    assert verify_store(fs, DATA).ok
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert reopened.recovery_report.recovered_to == ends[-1]
    assert reopened.recovery_report.truncated_at is None
    result, _ = reopened.put_nowait(_req(10))
    assert result.physical_offset == ends[-1]


def test_preparing_ahead_keeps_half_a_step_ready_and_stops_at_the_segment_end() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    for i in range(300):  # about 90 KiB: past the first segment
        store.put_nowait(_req(i))
        if i % 10 == 9:
            store.flush()
            log = store._log
            segment = log.segments.active
            assert segment is not None
            prepared = segment.handle.prepared()
            assert prepared == SEGMENT or prepared - (log.write_offset - segment.base) >= 4 * 1024
    first, second = _segments(fs)
    assert len(fs.read_file(first)) == SEGMENT
    assert len(fs.read_file(second)) < SEGMENT
    assert _bodies(store) == [_req(i).body for i in range(300)]
    assert verify_store(fs, DATA).ok


def test_a_store_whose_files_end_at_their_data_opens_and_continues() -> None:
    """Compatibility: segments written without preallocation (what earlier versions wrote, and
    ``prealloc_bytes=0`` still writes) open as they are; the tail is prepared from then on."""
    fs = FaultyFileSystem()
    old = MessageStore.open(_config(prealloc_bytes=0), fs=fs, clock=FakeClock())
    for i in range(300):  # over a segment boundary
        old.put_nowait(_req(i))
    old.flush()
    old.checkpoint()
    sizes = {path: len(fs.read_file(path)) for path in _segments(fs)}
    assert len(sizes) == 2 and all(fs.read_file(path)[-1] != 0 for path in sizes), "files end at their data"
    end = old.flushed_offset
    fs.lose_unfsynced()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert store.recovery_report.recovered_to == end
    assert store.recovery_report.truncated_at is None
    tail = _segments(fs)[-1]
    assert len(fs.read_file(tail)) > sizes[tail], "the tail got prepared space"
    for i in range(300, 320):
        result, _ = store.put_nowait(_req(i))
        assert result.queue_offset == i
    store.flush()
    fs.lose_unfsynced()
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert _bodies(reopened) == [_req(i).body for i in range(320)]
    assert verify_store(fs, DATA).ok


@pytest.mark.parametrize("seed", range(60))
def test_a_crash_putting_unsynced_sectors_down_in_any_order_loses_no_acknowledged_record(seed: int) -> None:
    rng = random.Random(seed)
    fs = FaultyFileSystem(rng)
    store = MessageStore.open(_config(prealloc_bytes=rng.choice([4096, 16 * 1024])), fs=fs, clock=FakeClock())
    acked = 0
    sent: list[bytes] = []
    for _ in range(rng.randint(1, 6)):
        for _ in range(rng.randint(1, 12)):
            sent.append(_req(len(sent), rng.randint(10, 900)).body)
            store.put_nowait(PutRequest("T", 0, sent[-1]))
        store.flush()
        acked = len(sent)
        if rng.random() < 0.3:
            store.checkpoint()
    for _ in range(rng.randint(1, 8)):  # written, never fsynced: the crash may keep any of its sectors
        sent.append(_req(len(sent), rng.randint(10, 900)).body)
        store.put_nowait(PutRequest("T", 0, sent[-1]))
        if rng.random() < 0.5:
            store._log.write_buffered()
    store._log.write_buffered()
    fs.crash()
    problems = verify_store(fs, DATA).problems
    assert all(p.torn_tail for p in problems), problems
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    kept = _bodies(reopened)
    assert len(kept) >= acked, "every acknowledged record survives"
    assert kept == sent[: len(kept)], "a prefix of the appends, no gap"
    assert verify_store(fs, DATA).ok, "recovery cut every piece of the unsynced writes"
    reopened.put_nowait(_req(len(kept)))
    reopened.flush()
    fs.lose_unfsynced()
    again = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert len(_bodies(again)) == len(kept) + 1


def _store_with_unsynced_tail() -> tuple[FaultyFileSystem, list[tuple[int, int]], int]:
    """Five records fsynced (checkpoint before them), then three written but never fsynced."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    store.checkpoint()
    spans = []
    for i in range(8):
        if i == 5:
            store.flush()
        result, _ = store.put_nowait(_req(i, 600))
        spans.append((result.physical_offset, result.physical_offset + result.size))
    store._log.write_buffered()
    return fs, spans, store.flushed_offset


def test_a_valid_record_after_zeros_in_the_unsynced_tail_is_cut_as_a_torn_tail() -> None:
    """The disk put the last record's sectors down but not those of the two before it."""
    fs, spans, flushed = _store_with_unsynced_tail()
    (path,) = _segments(fs)
    file = fs.files[path]
    file.data[spans[5][0] : spans[7][0]] = bytes(spans[7][0] - spans[5][0])
    file.durable = bytes(file.data)
    [problem] = verify_store(fs, DATA).problems
    assert problem.torn_tail and problem.offset == flushed
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    report = reopened.recovery_report
    assert report.recovered_to == flushed == spans[4][1]
    assert report.truncated_at == flushed
    assert _bodies(reopened) == [_req(i, 600).body for i in range(5)]
    assert not any(fs.read_file(path)[flushed:]), "the record after the zeros is gone from disk"


def test_a_torn_record_with_an_unwritten_sector_before_a_valid_record_is_a_torn_tail() -> None:
    fs, spans, flushed = _store_with_unsynced_tail()
    (path,) = _segments(fs)
    file = fs.files[path]
    sector = (spans[5][0] + 600) // 512 * 512  # a whole sector inside record 5 never landed
    file.data[sector : sector + 512] = bytes(512)
    file.durable = bytes(file.data)
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert reopened.recovery_report.truncated_at == flushed
    assert _bodies(reopened) == [_req(i, 600).body for i in range(5)]


def _put_eight_and_flush(store: MessageStore) -> list[tuple[int, int]]:
    """Eight 600-byte records, fsynced: each record's (start, end) in the log."""
    spans = []
    for i in range(8):
        result, _ = store.put_nowait(_req(i, 600))
        spans.append((result.physical_offset, result.physical_offset + result.size))
    store.flush()
    return spans


def test_zeros_in_what_the_checkpoint_says_was_fsynced_refuse_to_open() -> None:
    """Before the checkpoint's flushed offset the bytes were durable: zeros there are damage, and the
    valid records after them must not be cut as if they were pieces of an unsynced write."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    spans = _put_eight_and_flush(store)
    # the queues were made durable up to record 2, the log was fsynced through record 7
    save_checkpoint(fs, DATA, Checkpoint(spans[2][1], spans[7][1], 0))
    (path,) = _segments(fs)
    file = fs.files[path]
    file.data[spans[3][0] : spans[5][0]] = bytes(spans[5][0] - spans[3][0])
    file.durable = bytes(file.data)
    with pytest.raises(CorruptRecord, match="a valid record follows"):
        MessageStore.open(_config(), fs=fs, clock=FakeClock())
    [problem] = verify_store(fs, DATA).problems
    assert not problem.torn_tail
    assert any(fs.read_file(path)[spans[5][0] :]), "nothing was cut"


@pytest.mark.parametrize("prealloc_bytes", [0, 8 * 1024], ids=["growing", "preallocated"])
async def test_a_failed_write_leaves_the_file_as_it_was(prealloc_bytes: int) -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(prealloc_bytes), fs=fs, clock=FakeClock())
    await store.start()
    await store.put(_req(0))
    before = {path: bytes(f.data) for path, f in fs.files.items()}
    fs.fail_next_write(errno.EIO, path_prefix=COMMITLOG)
    with pytest.raises(StoreFenced, match="write to"):
        await store.put(_req(1))
    assert {path: bytes(f.data) for path, f in fs.files.items()} == before
    await store.close()


def test_a_full_disk_while_preparing_stops_preparing_and_the_store_keeps_serving() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    fs.set_space_left(7000)  # room for the first group, less than the next 8 KiB step
    for i in range(20):  # over half the prepared 8 KiB: preparing more fails with ENOSPC
        store.put_nowait(_req(i))
    store.flush()
    assert not store.fenced
    assert store._log.prepare_due() is None, "no more preparing this segment on a full disk"
    assert fs.space_left == 7000 - 20 * 20, "what the failed step took was given back (20 units used)"
    acked = 20
    failure: DiskFull | None = None
    for i in range(20, 200):  # the rest of the prepared space, then growing until the disk is full
        store.put_nowait(_req(i))
        try:
            store.flush()
        except DiskFull as exc:
            failure = exc
            break
        acked += 1
    assert failure is not None and "nothing was written" in failure.message
    assert acked > 26, "the prepared space took no new space"
    assert not store.fenced
    fs.set_space_left(None)
    store.put_nowait(_req(acked + 1))
    store.flush()
    fs.lose_unfsynced()
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert _bodies(reopened) == [_req(i).body for i in [*range(acked), acked + 1]]


def test_the_segment_after_a_full_disk_is_prepared_again() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    fs.set_space_left(7000)
    for i in range(20):
        store.put_nowait(_req(i))
    store.flush()
    assert store._log.prepare_due() is None
    fs.set_space_left(None)  # room again (an operator freed space)
    count = 20
    while len(_segments(fs)) < 2:  # fill the first segment until the log rolls to a new one
        store.put_nowait(_req(count))
        store.flush()
        count += 1
    newest = max(_segments(fs))
    assert len(fs.read_file(newest)) >= 4096, "the new segment was prepared ahead"
    assert not store.fenced
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert _bodies(reopened) == [_req(i).body for i in range(count)]


@pytest.mark.parametrize(
    ("mode", "inline_sync_us_max"),
    [(FlushMode.SYNC, math.inf), (FlushMode.SYNC, -1.0), (FlushMode.ASYNC, math.inf)],
    ids=["sync-inline", "sync-thread", "async"],
)
async def test_the_started_store_prepares_ahead_in_the_background_in_sync_mode(
    mode: FlushMode, inline_sync_us_max: float
) -> None:
    fs = FaultyFileSystem()
    config = StoreConfig(data_dir=DATA, segment_bytes=SEGMENT, prealloc_bytes=4096, flush_mode=mode,
                         flush_interval_ms=1)  # fmt: skip
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    store.inline_sync_us_max = inline_sync_us_max
    await store.start()
    for i in range(0, 296, 8):  # groups of eight, about 90 KiB: a roll and many steps
        await store.put_batch([_req(j) for j in range(i, i + 8)])
    await store.close()
    first, second = _segments(fs)
    if mode is FlushMode.SYNC:
        assert len(fs.read_file(first)) == SEGMENT
        assert 0 < len(fs.read_file(second)) < SEGMENT
        assert fs.read_file(second)[-1] == 0, "prepared ahead"
    else:  # ASYNC fsyncs once per interval: nothing to save, nothing prepared
        assert fs.read_file(second)[-1] != 0, "the file ends at its data"
    fs.lose_unfsynced()
    reopened = MessageStore.open(config, fs=fs, clock=FakeClock())
    assert _bodies(reopened) == [_req(i).body for i in range(296)]
    assert verify_store(fs, DATA).ok


async def test_groups_too_large_to_gain_from_it_are_not_prepared_for() -> None:
    """Zeros cost a write of their own: for groups averaging over 64 KiB they cost more than the
    journaled size changes they would save, so the file grows with the groups."""
    fs = FaultyFileSystem()
    config = StoreConfig(data_dir=DATA, segment_bytes=4 * 1024 * 1024, prealloc_bytes=256 * 1024)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    await store.start()
    (path,) = _segments(fs)
    assert len(fs.read_file(path)) == 256 * 1024, "prepared at open"
    for i in range(12):  # one group of about 100 KiB each
        await store.put_batch([_req(j, 1000) for j in range(100 * i, 100 * i + 100)])
    await store.close()
    data = fs.read_file(path)
    assert len(data) > 1024 * 1024 and data[-1] != 0, "the file ends at its data"
    fs.lose_unfsynced()
    reopened = MessageStore.open(config, fs=fs, clock=FakeClock())
    assert reopened.max_offset("T", 0) == 1200
    assert [r.body for r in reopened.read_queue("T", 0, 1190, 10).records] == [
        _req(i, 1000).body for i in range(1190, 1200)
    ]


def test_zeros_to_the_end_of_what_the_checkpoint_says_was_fsynced_are_reported_not_taken_as_the_end() -> None:
    """Zeros from a record start to the end of the file normally end a preallocated tail's data; but
    before the checkpoint's flushed offset the bytes were fsynced, so zeros there mean acknowledged
    records are missing: recovery reports the cut (as for any damaged tail) and verify names it,
    instead of both taking the zeros silently for the end of the data."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    spans = _put_eight_and_flush(store)
    save_checkpoint(fs, DATA, Checkpoint(spans[2][1], spans[7][1], 0))
    (path,) = _segments(fs)
    file = fs.files[path]
    file.data[spans[5][0] :] = bytes(len(file.data) - spans[5][0])
    file.durable = bytes(file.data)
    [problem] = verify_store(fs, DATA).problems
    assert problem.offset == spans[5][0] and "flushed offset" in problem.reason
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    report = reopened.recovery_report
    assert report.truncated_at == spans[5][0] and "flushed offset" in report.reason
    assert _bodies(reopened) == [_req(i, 600).body for i in range(5)]


@pytest.mark.parametrize("prealloc_bytes", [8 * 1024, 0])
def test_a_log_cut_at_a_record_end_before_the_flushed_offset_is_reported(prealloc_bytes: int) -> None:
    """The same loss without zeros: the tail file ends exactly where a record ends, before the
    checkpoint's flushed offset (a file cut short by a disk or an operator). Verify took it for a clean
    end and the broker served the store with acknowledged records silently missing."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(prealloc_bytes), fs=fs, clock=FakeClock())
    spans = _put_eight_and_flush(store)
    save_checkpoint(fs, DATA, Checkpoint(spans[2][1], spans[7][1], 0))
    (path,) = _segments(fs)
    file = fs.files[path]
    del file.data[spans[5][0] :]
    file.durable = bytes(file.data)
    [problem] = verify_store(fs, DATA).problems
    assert problem.offset == spans[5][0] and "flushed offset" in problem.reason and problem.torn_tail
    reopened = MessageStore.open(_config(prealloc_bytes), fs=fs, clock=FakeClock())
    report = reopened.recovery_report
    assert report is not None
    assert report.truncated_at == spans[5][0] and "flushed offset" in report.reason
    assert _bodies(reopened) == [_req(i, 600).body for i in range(5)]
