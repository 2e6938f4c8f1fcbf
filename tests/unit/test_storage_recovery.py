"""Recovery: torn tails at every byte, mid-log corruption refused, checkpoint-based restart."""

from __future__ import annotations

import copy
import posixpath

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import CorruptRecord
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

DATA = "/data"
SEGMENT = 64 * 1024


PREALLOC = StoreConfig(data_dir=DATA).prealloc_bytes


def _config(segment_bytes: int = SEGMENT, prealloc_bytes: int = PREALLOC) -> StoreConfig:
    return StoreConfig(data_dir=DATA, segment_bytes=segment_bytes, consume_queue_units_per_file=8,
                       prealloc_bytes=prealloc_bytes)  # fmt: skip


def _put(store: MessageStore, i: int, size: int = 100) -> tuple[int, int]:
    result, _ = store.put_nowait(PutRequest("T", i % 2, bytes([i % 256]) * size, b"K\x01v%d\x02" % i))
    return result.physical_offset, result.physical_offset + result.size


def _segment_paths(fs: FaultyFileSystem) -> list[str]:
    directory = posixpath.join(DATA, "commitlog")
    return [posixpath.join(directory, name) for name in fs.list_dir(directory)]


@pytest.mark.parametrize("prealloc_bytes", [0, PREALLOC], ids=["growing", "preallocated"])
def test_torn_tail_cut_at_every_byte_of_the_last_three_records(prealloc_bytes: int) -> None:
    """Growing files (stores before preallocation too): the file ends at the cut. Preallocated: the
    bytes from the cut on are the prepared zeros (the write landed up to the cut)."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(prealloc_bytes=prealloc_bytes), fs=fs, clock=FakeClock())
    spans = [_put(store, i) for i in range(7)]
    store.flush()
    store.checkpoint()  # recovery starts here; the last three records are replayed
    spans += [_put(store, i) for i in range(7, 10)]
    store.flush()
    (segment,) = _segment_paths(fs)
    full = fs.read_file(segment)
    assert len(full) == (SEGMENT if prealloc_bytes else spans[-1][1])
    assert not any(full[spans[-1][1] :])
    cuts = 0
    for cut in range(spans[7][0], spans[-1][1] + 1):
        crashed = copy.deepcopy(fs)
        if prealloc_bytes:
            file = crashed.files[segment]
            file.data[cut : spans[-1][1]] = bytes(spans[-1][1] - cut)
            file.durable = bytes(file.data)
        else:
            handle = crashed.open(segment)
            handle.truncate(cut)
            handle.sync()
        reopened = MessageStore.open(_config(prealloc_bytes=prealloc_bytes), fs=crashed, clock=FakeClock())
        survivors = [s for s in spans if s[1] <= cut]
        report = reopened.recovery_report
        boundary = survivors[-1][1]
        assert report.recovered_to == boundary
        assert report.truncated_at == (None if cut == boundary else boundary)
        file_end = SEGMENT if prealloc_bytes and cut != boundary else cut  # bytes cut from the file
        assert report.truncated_bytes == file_end - boundary
        assert report.truncated_records == (0 if cut == boundary else 1)
        assert report.scanned_from == spans[6][1]
        assert report.records_scanned == len(survivors) - 7
        assert reopened.max_offset("T", 0) + reopened.max_offset("T", 1) == len(survivors)
        for i, (start, _) in enumerate(survivors):
            assert reopened.read(start).body == bytes([i]) * 100
        on_disk = crashed.read_file(segment)
        assert on_disk[:boundary] == full[:boundary]
        assert not any(on_disk[boundary:]), "the torn bytes are gone from disk"
        next_start, _ = _put(reopened, len(survivors))
        assert next_start == boundary
        cuts += 1
    assert cuts == spans[-1][1] - spans[7][0] + 1


def test_recovery_without_checkpoint_rebuilds_queues_and_index_from_the_log() -> None:
    fs = FaultyFileSystem()
    keys = lambda topic, props: [props.decode()]  # noqa: E731
    store = MessageStore.open(_config(4096), fs=fs, clock=FakeClock(), index_keys=keys)
    for i in range(20):
        _put(store, i)
    store.flush()
    for path in list(fs.files):
        if "/consumequeue/" in path or "/index/" in path or path.endswith("checkpoint"):
            fs.remove(path)
    reopened = MessageStore.open(_config(4096), fs=fs, clock=FakeClock(), index_keys=keys)
    assert reopened.recovery_report.scanned_from == 0
    assert reopened.recovery_report.records_scanned == 20
    assert reopened.max_offset("T", 0) == 10
    assert reopened.max_offset("T", 1) == 10
    [record] = reopened.query_by_key("K\x01v7\x02", 5)
    assert record.body == bytes([7]) * 100
    assert len(_segment_paths(fs)) > 1, "the test must span several segments"


def test_power_cut_keeps_everything_flushed() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(4096), fs=fs, clock=FakeClock())
    for i in range(12):
        _put(store, i)
    store.flush()
    flushed = store.flushed_offset
    for i in range(12, 20):
        _put(store, i)
    fs.lose_unfsynced()
    reopened = MessageStore.open(_config(4096), fs=fs, clock=FakeClock())
    assert reopened.recovery_report.recovered_to == flushed
    assert reopened.max_offset("T", 0) + reopened.max_offset("T", 1) == 12


def _corrupt_store(segment_index: int, record_index: int) -> tuple[FaultyFileSystem, str, int]:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(4096), fs=fs, clock=FakeClock())
    spans = [_put(store, i) for i in range(30)]
    store.flush()
    store.checkpoint()
    paths = _segment_paths(fs)
    path = paths[segment_index]
    base = int(posixpath.basename(path))
    in_segment = [s for s in spans if base <= s[0] < base + 4096]
    start = in_segment[record_index][0]
    fs.flip_bit(path, start - base + 90, 3)
    # drop the checkpoint so recovery scans the damaged segment
    fs.remove(posixpath.join(DATA, "checkpoint"))
    return fs, path, start - base


@pytest.mark.parametrize(("segment_index", "record_index"), [(0, 1), (-1, 0)])
def test_mid_log_corruption_refuses_to_open_with_a_precise_message(
    segment_index: int, record_index: int
) -> None:
    fs, path, position = _corrupt_store(segment_index, record_index)
    with pytest.raises(CorruptRecord) as info:
        MessageStore.open(_config(4096), fs=fs, clock=FakeClock())
    message = info.value.message
    assert path in message
    assert f"position {position}" in message
    assert "CRC mismatch" in message
    assert "txmq store verify" in message
    assert "txmq store repair" in message
    assert fs.read_file(path)  # nothing was truncated


def test_corrupt_checkpoint_falls_back_to_a_full_rebuild() -> None:
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    for i in range(5):
        _put(store, i)
    store.flush()
    store.checkpoint()
    fs.flip_bit(posixpath.join(DATA, "checkpoint"), 14)
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    assert reopened.recovery_report.scanned_from == 0
    assert any("checkpoint unreadable" in note for note in reopened.recovery_report.notes)
    assert reopened.max_offset("T", 0) == 3


def _cq_files(fs: FaultyFileSystem, queue_id: int) -> list[str]:
    directory = posixpath.join(DATA, "consumequeue", "T", str(queue_id))
    return [posixpath.join(directory, name) for name in fs.list_dir(directory)]


@pytest.mark.parametrize("damage", ["removed", "emptied", "cut", "flipped"])
def test_a_damaged_consume_queue_is_rebuilt_from_the_log(damage: str) -> None:
    """Probe: a ConsumeQueue file removed, emptied, cut short or with a flipped unit, broker stopped
    cleanly: it started and served the queue without the lost units (records in the log, invisible to
    every consumer). The checkpoint now records each queue's end; a shorter queue makes recovery
    rebuild the queues and the index from the log."""
    fs = FaultyFileSystem()
    store = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    for i in range(40):
        _put(store, i)
    store.flush()
    store.run_once()
    store.checkpoint()
    fs.lose_unfsynced()  # a stop: what was made durable stays
    last = _cq_files(fs, 0)[-1]
    data = fs.files[last].data
    if damage == "removed":
        for path in _cq_files(fs, 0):
            fs.remove(path)
    elif damage == "emptied":
        del data[:]
    elif damage == "cut":
        del data[len(data) // 2 :]
    else:
        data[-15] ^= 0x40  # the last unit's size: it no longer matches its record
    if damage != "removed":
        fs.files[last].durable = bytes(data)
    reopened = MessageStore.open(_config(), fs=fs, clock=FakeClock())
    reopened.flush()
    reopened.run_once()
    for queue_id in (0, 1):
        records = reopened.read_queue("T", queue_id, 0, 100).records
        assert [r.body[:1] for r in records] == [bytes([i]) for i in range(queue_id, 40, 2)]
    assert [r.queue_offset for r in reopened.read_queue("T", 0, 0, 100).records] == list(range(20))
