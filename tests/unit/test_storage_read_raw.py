"""``MessageStore.read_queue_raw`` (the lean pull path's read) against ``read_queue``: same units, byte
budget, statuses and offsets, the same record fields, the sync-flush visibility limit, retention,
tag-code filtering without reading the log, and the same errors on a corrupt record."""

from __future__ import annotations

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import CorruptRecord
from txmq.storage import codec
from txmq.storage.api import PutRequest, ReadStatus, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

DATA = "/data"


def _open(fs: FaultyFileSystem, clock: FakeClock | None = None, segment_bytes: int = 4096) -> MessageStore:
    config = StoreConfig(data_dir=DATA, segment_bytes=segment_bytes, consume_queue_units_per_file=4,
                         retention_ms=10_000)  # fmt: skip
    return MessageStore.open(config, fs=fs, clock=clock or FakeClock())


def _same(store: MessageStore, topic: str, queue_id: int, offset: int, count: int, max_bytes: int = 1 << 22,
          tags_codes: frozenset[int] | None = None) -> int:  # fmt: skip
    """Assert both reads agree; returns how many records the raw read gave."""
    general = store.read_queue(topic, queue_id, offset, count, max_bytes)
    raw = store.read_queue_raw(topic, queue_id, offset, count, max_bytes, tags_codes)
    assert (raw.status, raw.next_offset, raw.min_offset, raw.max_offset) == (
        general.status, general.next_offset, general.min_offset, general.max_offset,
    )  # fmt: skip
    wanted = [r for r in general.records if tags_codes is None or r.tags_code in tags_codes]
    assert len(raw.records) == len(wanted)
    for fields, record in zip(raw.records, wanted, strict=True):
        assert fields[:11] == (
            record.size, record.queue_id, record.flag, record.queue_offset, record.physical_offset,
            record.sys_flag, record.born_timestamp_ms, record.store_timestamp_ms, record.tags_code,
            record.reconsume_times, record.prepared_transaction_offset,
        )  # fmt: skip
        expected = (record.topic.encode(), record.born_host.encode(), record.store_host.encode())
        assert (*codec.names_of(fields[11]), fields[12]) == (*expected, record.properties)
        assert bytes(fields[13]) == record.body
    return len(raw.records)


def _put(store: MessageStore, topic: str, body: bytes, tags_code: int = 0, queue_id: int = 0) -> None:
    store.put_nowait(PutRequest(topic, queue_id, body, properties=b"TAGS\x01t%d\x02" % tags_code,
                                tags_code=tags_code))  # fmt: skip


def test_sync_mode_limit_applies_to_raw_reads() -> None:
    store = _open(FaultyFileSystem())
    for i in range(3):
        _put(store, "T", b"b%d" % i)
    assert store.read_queue_raw("T", 0, 0, 10).status is ReadStatus.NO_QUEUE
    store.flush()
    for i in range(3, 5):
        _put(store, "T", b"b%d" % i)  # written to the buffer, not fsynced: not visible
    assert _same(store, "T", 0, 0, 10) == 3
    assert store.read_queue_raw("T", 0, 3, 10).status is ReadStatus.NO_NEW_MESSAGE
    store.flush()
    assert _same(store, "T", 0, 0, 10) == 5


def test_every_position_budget_and_filter_agrees_across_files_and_segments() -> None:
    store = _open(FaultyFileSystem())  # 4 units per ConsumeQueue file, 4 KB segments
    for i in range(30):
        _put(store, "T", bytes([i]) * (50 + 97 * (i % 7)), tags_code=i % 3, queue_id=i % 2)
    store.flush()
    for queue_id in (0, 1, 2):
        for offset in range(17):
            for count in (1, 3, 4, 5, 32):
                for max_bytes in (1, 300, 1000, 1 << 22):
                    for codes in (None, frozenset({1}), frozenset({0, 2}), frozenset({99})):
                        _same(store, "T", queue_id, offset, count, max_bytes, codes)


def test_a_damaged_record_the_filter_leaves_out_does_not_stop_the_pull() -> None:
    fs = FaultyFileSystem()
    store = _open(fs, segment_bytes=64 * 1024)
    for i in range(6):
        _put(store, "T", b"m%d" % i, tags_code=i % 2)
    store.flush()
    odd = store.read_queue_raw("T", 0, 0, 10, tags_codes=frozenset({1}))
    first = store.read_queue("T", 0, 0, 1).records[0]
    fs.flip_bit(f"{DATA}/commitlog/{0:020d}", first.physical_offset + 40)  # corrupt m0 (tags code 0)
    again = store.read_queue_raw("T", 0, 0, 10, tags_codes=frozenset({1}))
    assert (
        [bytes(r[13]) for r in again.records] == [bytes(r[13]) for r in odd.records] == [b"m1", b"m3", b"m5"]
    )
    assert again.next_offset == 6
    with pytest.raises(CorruptRecord, match="CRC") as general:
        store.read_queue("T", 0, 0, 10)
    with pytest.raises(CorruptRecord, match="CRC") as raw:
        store.read_queue_raw("T", 0, 0, 10)
    assert str(raw.value) == str(general.value)


def test_retention_agrees() -> None:
    clock = FakeClock(1_000_000)
    store = _open(FaultyFileSystem(), clock)
    for i in range(12):
        _put(store, "T", b"%03d" % i + b"x" * 1000)
    store.flush()
    clock.advance(60_000)
    _put(store, "T", b"new")
    store.flush()
    assert store.delete_expired(clock.now_ms()) > 0
    low = store.min_offset("T", 0)
    assert low > 0
    assert store.read_queue_raw("T", 0, 0, 5).status is ReadStatus.OFFSET_TOO_SMALL
    for offset in range(15):
        _same(store, "T", 0, offset, 20)
    assert bytes(store.read_queue_raw("T", 0, low, 20).records[-1][13]) == b"new"


def _units_agree(store: MessageStore, topic: str, offset: int, count: int) -> None:
    units = store.queue_units(topic, 0, offset, count)
    first, raw = store.queue_raw_units(topic, 0, offset, count)
    assert raw == [(u.physical_offset, u.size, u.tags_code) for u in units]
    if units:
        assert first == units[0].queue_offset
    # the scans' checked reads: the same units, each naming its record (nothing to rebuild)
    assert store.units_hold(topic, 0, first, raw)
    assert store.checked_units(topic, 0, offset, count) == units


def test_queue_raw_units_agree_with_queue_units_across_files_and_retention() -> None:
    """The transaction cursor's and the delay scans' reads: the same units as ``queue_units`` (4 units
    a queue file here, so reads cross files), and the queue offset of the first even when retention
    moved the queue's start past the offset asked for."""
    clock = FakeClock(1_000_000)
    store = _open(FaultyFileSystem(), clock)
    assert store.queue_raw_units("T", 0, 3, 10) == (3, [])  # no such queue
    for i in range(12):
        _put(store, "T", b"%03d" % i + b"x" * 1000, tags_code=i)
    store.flush()
    for offset in range(14):
        for count in (1, 3, 5, 512):
            _units_agree(store, "T", offset, count)
    clock.advance(60_000)
    _put(store, "T", b"new", tags_code=99)
    store.flush()
    assert store.delete_expired(clock.now_ms()) > 0
    low = store.min_offset("T", 0)
    assert low > 0
    first, raw = store.queue_raw_units("T", 0, 0, 512)
    assert first == low and raw[-1][2] == 99
    for offset in range(15):
        _units_agree(store, "T", offset, 20)
