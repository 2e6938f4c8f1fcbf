"""MessageStore behaviour: SYNC visibility, queue reads, lookups, bad input, retention."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from txmq.common import limits
from txmq.common.clock import FakeClock
from txmq.common.errors import (
    InvalidArgument,
    InvalidOffset,
    InvalidProperty,
    InvalidTopic,
    MessageTooLarge,
    PayloadTooLarge,
    PropertiesTooLarge,
    StorageError,
)
from txmq.storage.api import PutRequest, ReadStatus, StoreConfig
from txmq.storage.checkpoint import load_checkpoint
from txmq.storage.fs import FaultyFileSystem, OsFileSystem
from txmq.storage.store import MessageStore

DATA = "/data"


def _open(
    fs: FaultyFileSystem, clock: FakeClock | None = None, segment_bytes: int = 64 * 1024
) -> MessageStore:
    config = StoreConfig(data_dir=DATA, segment_bytes=segment_bytes, consume_queue_units_per_file=4,
                         retention_ms=10_000)  # fmt: skip
    keys = lambda topic, props: [p.split("\x01")[1] for p in props.decode().split("\x02") if p]  # noqa: E731
    return MessageStore.open(config, fs=fs, clock=clock or FakeClock(), index_keys=keys)


def test_sync_mode_never_shows_unflushed_records() -> None:
    store = _open(FaultyFileSystem())
    arrivals: list[tuple[str, int, int]] = []
    store.add_arrival_listener(lambda t, q, n: arrivals.append((t, q, n)))
    results = [store.put_nowait(PutRequest("T", 0, b"b%d" % i))[0] for i in range(3)]
    assert store.run_once() == 0
    assert store.max_offset("T", 0) == 0
    assert store.read_queue("T", 0, 0, 10).status is ReadStatus.NO_QUEUE
    assert store.queue_units("T", 0, 0, 10) == []
    with pytest.raises(InvalidOffset, match="beyond the readable end"):
        store.read(results[0].physical_offset)
    assert arrivals == []
    assert store.flushed_offset == 0 < store.max_physical_offset
    store.flush()
    assert store.dispatched_offset == store.flushed_offset == store.max_physical_offset
    assert arrivals == [("T", 0, 3)]
    read = store.read_queue("T", 0, 0, 10)
    assert read.status is ReadStatus.FOUND
    assert [r.body for r in read.records] == [b"b0", b"b1", b"b2"]
    assert (read.next_offset, read.min_offset, read.max_offset) == (3, 0, 3)


def test_queue_reads_statuses_units_and_time_lookup() -> None:
    clock = FakeClock(1_000_000)
    store = _open(FaultyFileSystem(), clock)
    for i in range(10):
        store.put_nowait(PutRequest("T", 1, b"x" * 50, tags_code=i))
        clock.advance(10)
    store.flush()
    assert store.queues() == {"T": [1]}
    units = store.queue_units("T", 1, 2, 5)
    assert [u.queue_offset for u in units] == [2, 3, 4, 5, 6]
    assert [u.tags_code for u in units] == [2, 3, 4, 5, 6]
    assert store.read_queue("T", 1, 10, 5).status is ReadStatus.NO_NEW_MESSAGE
    assert store.read_queue("T", 1, 11, 5).status is ReadStatus.OFFSET_OVERFLOW
    limited = store.read_queue("T", 1, 0, 10, max_bytes=300)
    assert 1 <= len(limited.records) < 10
    assert store.offset_by_time("T", 1, 1_000_035) == 4
    assert store.offset_by_time("T", 1, 0) == 0
    assert store.offset_by_time("T", 1, 9_999_999) == 10


def test_query_by_key_newest_first_bounded_and_time_filtered() -> None:
    clock = FakeClock(5_000)
    store = _open(FaultyFileSystem(), clock)
    for i in range(6):
        store.put_nowait(PutRequest("T", 0, b"%d" % i, b"KEYS\x01order-%d\x02" % (i % 2)))
        clock.advance(100)
    store.flush()
    assert [r.body for r in store.query_by_key("order-1", 10)] == [b"5", b"3", b"1"]
    assert [r.body for r in store.query_by_key("order-1", 2)] == [b"5", b"3"]
    assert [r.body for r in store.query_by_key("order-0", 10, begin_ms=5_100, end_ms=5_300)] == [b"2"]
    assert store.query_by_key("missing", 10) == []


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


BAD = [
    (PutRequest("", 0, b"x"), InvalidTopic),
    (PutRequest("t" * (limits.topic_name_len_max + 1), 0, b"x"), InvalidTopic),
    (PutRequest("bad/topic", 0, b"x"), InvalidTopic),
    (PutRequest("T", -1, b"x"), InvalidArgument),
    (PutRequest("T", 0, b"x" * (limits.body_bytes_max + 1)), MessageTooLarge),
    (PutRequest("T", 0, b"x", b"a" * (limits.properties_bytes_max + 1)), PropertiesTooLarge),
    (PutRequest("T", 0, b"x", b"K\x01\xff\xfe\x02"), InvalidProperty),
    (PutRequest("T", 0, b"x", flag=2**40), InvalidArgument),
    (PutRequest("T", 0, b"x", tags_code=2**63), InvalidArgument),
    (PutRequest("T", 0, b"x", born_timestamp_ms=-(2**63) - 1), InvalidArgument),
    (PutRequest("T", 0, b"x", prepared_transaction_offset=2**63), InvalidArgument),
    (PutRequest("T", 0, b"x", "K\x01caf\xe9\x02".encode("latin-1")), InvalidProperty),  # not UTF-8
]


@pytest.mark.parametrize(("request_", "error"), BAD)
async def test_bad_input_is_rejected_and_changes_nothing_on_disk(
    tmp_path: Path, request_: PutRequest, error: type[Exception]
) -> None:
    store = MessageStore.open(StoreConfig(data_dir=str(tmp_path), segment_bytes=64 * 1024))
    await store.start()
    await store.put(PutRequest("T", 0, b"good"))
    before = _tree_digest(tmp_path)
    with pytest.raises(error):
        await store.put(request_)
    with pytest.raises(error):
        await store.put_batch([PutRequest("T", 0, b"fine"), request_])
    assert _tree_digest(tmp_path) == before
    await store.close()


async def test_bad_reads_and_oversized_batches() -> None:
    store = _open(FaultyFileSystem(), segment_bytes=8192)
    with pytest.raises(InvalidOffset):
        store.read(-1)
    # a negative queue offset is below every queue's minimum, as RocketMQ's getMessage answers it
    missing = store.read_queue("T", 0, -5, 1)
    assert (missing.status, list(missing.records), missing.next_offset) == (ReadStatus.NO_QUEUE, [], 0)
    with pytest.raises(InvalidArgument):
        store.read_queue("T", 0, 0, 0)
    with pytest.raises(MessageTooLarge, match="record or batch"):
        store.put_nowait(PutRequest("T", 0, b"x" * 9000))
    with pytest.raises(PayloadTooLarge):
        await store.put_batch([PutRequest("T", 0, b"x")] * (limits.batch_count_max + 1))
    assert store.max_physical_offset == 0


def test_batches_are_atomic_and_never_span_segments() -> None:
    fs = FaultyFileSystem()
    store = _open(fs, segment_bytes=4096)
    store.put_nowait(PutRequest("T", 0, b"a" * 3000))
    batch = [PutRequest("T", i % 2, b"b" * 500) for i in range(4)]
    results, _ = store.put_batch_nowait(batch)
    assert {r.physical_offset // 4096 for r in results} == {1}, "the whole batch went to the next segment"
    assert [r.queue_offset for r in results] == [1, 0, 2, 1]
    store.flush()
    assert store.read(results[-1].physical_offset).body == b"b" * 500


def test_retention_deletes_old_segments_but_never_the_active_one() -> None:
    fs = FaultyFileSystem()
    clock = FakeClock(1_000_000)
    store = _open(fs, clock, segment_bytes=4096)
    offsets = [
        store.put_nowait(PutRequest("T", 0, b"%03d" % i + b"x" * 1000))[0].physical_offset for i in range(12)
    ]
    store.flush()
    segments_before = len(fs.list_dir(f"{DATA}/commitlog"))
    assert segments_before >= 4
    assert store.delete_expired(clock.now_ms() + 9_999) == 0, "not old enough yet"
    clock.advance(60_000)
    store.put_nowait(PutRequest("T", 0, b"new"))
    store.flush()
    removed = store.delete_expired(clock.now_ms())
    remaining = fs.list_dir(f"{DATA}/commitlog")
    assert removed == segments_before - 1
    assert len(remaining) == 1, "only the active segment is left"
    first_kept = next(i for i, offset in enumerate(offsets) if offset >= store.min_physical_offset)
    assert first_kept > 0
    assert store.min_offset("T", 0) == first_kept
    assert store.read_queue("T", 0, 0, 5).status is ReadStatus.OFFSET_TOO_SMALL
    assert store.read_queue("T", 0, 0, 5).next_offset == first_kept
    assert store.read_queue("T", 0, first_kept, 20).records[-1].body == b"new"
    clock.advance(60_000)
    assert store.delete_expired(clock.now_ms()) == 0, "the active segment stays"
    reopened = _open(fs, clock, segment_bytes=4096)
    assert reopened.min_offset("T", 0) == first_kept
    assert reopened.max_offset("T", 0) == 13


def test_real_files_round_trip(tmp_path: Path) -> None:
    config = StoreConfig(data_dir=str(tmp_path), segment_bytes=4096)
    store = MessageStore.open(config)
    for i in range(20):
        store.put_nowait(PutRequest("T", 0, b"%d" % i * 100))
    store.flush()
    store.checkpoint()
    assert len(os.listdir(tmp_path / "commitlog")) > 1
    reopened = MessageStore.open(config)
    assert [r.body for r in reopened.read_queue("T", 0, 0, 50).records] == [
        b"%d" % i * 100 for i in range(20)
    ]


def test_a_failing_arrival_listener_does_not_stop_dispatch() -> None:
    store = _open(FaultyFileSystem())
    seen: list[int] = []

    def broken(topic: str, queue_id: int, next_offset: int) -> None:
        raise RuntimeError("listener bug")

    store.add_arrival_listener(broken)
    store.add_arrival_listener(lambda topic, queue_id, next_offset: seen.append(next_offset))
    store.put_nowait(PutRequest("T", 0, b"a"))
    store.flush()
    store.put_nowait(PutRequest("T", 0, b"b"))
    store.flush()
    assert seen == [1, 2]
    assert store.max_offset("T", 0) == 2


async def test_closed_store_refuses_appends() -> None:
    store = _open(FaultyFileSystem())
    await store.close()
    with pytest.raises(StorageError, match="closed"):
        store.put_nowait(PutRequest("T", 0, b"a"))


def test_records_from_walks_the_log_across_segments_up_to_the_readable_end() -> None:
    store = _open(FaultyFileSystem())
    appended = [store.put_nowait(PutRequest("T", 0, b"r%02d" % i + bytes(20_000)))[0] for i in range(8)]
    store.flush()
    store.run_once()
    late = store.put_nowait(PutRequest("T", 0, b"unflushed"))[0]  # buffered, not yet readable
    assert len(store._log.segments.segments) > 1  # the walk crosses segment ends
    start = appended[2].physical_offset
    walked = list(store.records_from(start))
    assert [r.physical_offset for r in walked] == [a.physical_offset for a in appended[2:]]
    assert [r.body[:3] for r in walked] == [b"r%02d" % i for i in range(2, 8)]
    assert list(store.records_from(late.physical_offset)) == []
    assert [r.physical_offset for r in store.records_from(-1)] == [a.physical_offset for a in appended]


def test_checkpoint_of_an_idle_store_writes_nothing(tmp_path: Path) -> None:
    """The checkpoint task runs every second: an idle store must not rewrite an identical checkpoint
    (two fsyncs and a rename on the event loop each time); a new record makes the next one write."""
    store = MessageStore.open(StoreConfig(data_dir=str(tmp_path), segment_bytes=4096))
    store.put_nowait(PutRequest("T", 0, b"first"))
    store.flush()
    store.checkpoint()
    path = tmp_path / "checkpoint"
    path.rename(tmp_path / "checkpoint.seen")  # a write would put it back
    for _ in range(3):
        store.checkpoint()
    assert not path.exists()
    (tmp_path / "checkpoint.seen").rename(path)
    store.put_nowait(PutRequest("T", 0, b"second"))
    store.flush()
    store.checkpoint()
    saved = load_checkpoint(OsFileSystem(), str(tmp_path))
    assert saved is not None and saved.dispatched_offset == store.dispatched_offset > 0


@pytest.mark.parametrize("wide", [2**62 - 1, 2**62, 2**63 - 1, -(2**62), -(2**62) - 1, -(2**63)])
def test_64_bit_fields_at_their_limits_and_utf8_properties_are_stored(tmp_path: Path, wide: int) -> None:
    """``_check_fields`` tests the 64-bit fields against narrower bounds first: a value past them
    (up to the on-disk width) still goes through the exact test and is stored; properties that are
    UTF-8 but not ASCII are accepted as before, by every put path."""
    store = MessageStore.open(StoreConfig(data_dir=str(tmp_path), segment_bytes=64 * 1024))
    properties = "KEYS\x01caf\u00e9 \u2603\x02".encode()
    request = PutRequest(
        "T", 0, b"x", properties, tags_code=wide, born_timestamp_ms=wide, prepared_transaction_offset=wide
    )
    first = store.put_nowait(request)[0]
    fields = MessageStore.fields_of(request)
    appended, _ = store.put_fields_nowait([fields, fields])
    store.flush()
    for offset in (first.physical_offset, appended[0].physical_offset, appended[1].physical_offset):
        record = store.read(offset)
        assert (record.tags_code, record.born_timestamp_ms, record.prepared_transaction_offset) == (wide,) * 3
        assert record.properties == properties
