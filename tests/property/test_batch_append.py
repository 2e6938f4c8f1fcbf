"""The batch append path (``CommitLog.append_records``: one struct pack for a batch, one dispatch entry,
ConsumeQueue units and index entries packed per batch) leaves exactly the files the single-record path
leaves: the same CommitLog bytes as ``codec.encode`` record by record, the same ConsumeQueue units, the
same key index entries, the same answers to reads and key queries."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.broker.records import index_keys
from txmq.common import limits
from txmq.common.clock import FakeClock
from txmq.storage import codec
from txmq.storage.api import AppendResult, FlushMode, PutRequest, StoreConfig
from txmq.storage.consume_queue import ConsumeQueue
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

NOW_MS = 1_700_000_000_000
STORE_HOST = "10.1.2.3:10911"


def _open(fs: FaultyFileSystem) -> MessageStore:
    config = StoreConfig(
        data_dir="/data", flush_mode=FlushMode.ASYNC, segment_bytes=1 << 16, store_host=STORE_HOST
    )
    return MessageStore.open(config, fs=fs, clock=FakeClock(start_ms=NOW_MS), index_keys=index_keys)


_keys = st.sampled_from(["", "KEYS\x01k1\x02", "KEYS\x01k1 k2\x02", "KEYS\x01k3 k3\x02"])
_uniq = st.sampled_from(["", "UNIQ_KEY\x01id-a\x02", "UNIQ_KEY\x01id-b\x02"])
_other = st.sampled_from(["", "TAGS\x01tag\x02", "é\x01ü\x02"])  # not ASCII: checked one by one

requests = st.builds(
    PutRequest,
    topic=st.sampled_from(["T", "T", "U"]),
    queue_id=st.sampled_from([0, 0, 1, 3]),
    body=st.binary(max_size=300),
    properties=st.tuples(_other, _keys, _uniq).map(lambda parts: "".join(parts).encode()),
    tags_code=st.integers(-(1 << 63), (1 << 63) - 1),
    flag=st.integers(-(1 << 31), (1 << 31) - 1),
    sys_flag=st.sampled_from([0, 4, 8]),
    born_timestamp_ms=st.integers(0, 1 << 42),
    born_host=st.sampled_from(["", "10.0.0.1:1", "10.0.0.2:5555"]),
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=st.integers(0, 1 << 40),
)


def _with_known_keys(req: PutRequest, known: bool) -> PutRequest:
    if not known:
        return req
    return dataclasses.replace(req, index_keys=tuple(index_keys(req.topic, req.properties)))


def _files(fs: FaultyFileSystem) -> dict[str, bytes]:
    return {path: fs.read_file(path) for path in sorted(fs.files) if "/checkpoint" not in path}


def _fields(req: PutRequest) -> codec.RecordFields:
    return codec.RecordFields(
        req.topic.encode(), req.queue_id, req.body, req.properties, req.tags_code, req.flag, req.sys_flag,
        req.born_timestamp_ms, req.born_host.encode(), req.reconsume_times, req.prepared_transaction_offset,
        req.index_keys,
    )  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.lists(requests, min_size=1, max_size=12), min_size=1, max_size=6),
    one_topic=st.booleans(),
    known_keys=st.booleans(),
)
def test_batches_leave_the_files_single_appends_leave(
    batches: list[list[PutRequest]], one_topic: bool, known_keys: bool
) -> None:
    if one_topic:  # the send lane's way in: put_records_nowait with one topic
        batches = [[dataclasses.replace(r, topic=b[0].topic) for r in b] for b in batches]
    batches = [[_with_known_keys(r, known_keys) for r in b] for b in batches]
    single_fs, batch_fs = FaultyFileSystem(), FaultyFileSystem()
    single, batched = _open(single_fs), _open(batch_fs)
    expected: list[AppendResult] = []
    got: list[AppendResult] = []
    for batch in batches:
        expected += [single.put_nowait(req)[0] for req in batch]
        if one_topic and len(batch) > 1:
            got += batched.put_records_nowait(batch[0].topic, [_fields(r) for r in batch])[0]
        else:
            got += batched.put_batch_nowait(batch)[0]
    assert got == expected
    single.flush()
    batched.flush()
    # the CommitLog holds exactly what the single-record encoder writes for each record
    log = b"".join(data for path, data in _files(batch_fs).items() if "/commitlog/" in path)
    requests_in_order = [r for b in batches for r in b]
    for req, result in zip(requests_in_order, expected, strict=True):
        record = codec.encode(
            _fields(req), store_host=STORE_HOST.encode(), queue_offset=result.queue_offset,
            physical_offset=result.physical_offset, store_timestamp_ms=NOW_MS,
        )  # fmt: skip
        segment_base = result.physical_offset - result.physical_offset % (1 << 16)
        position = result.physical_offset - segment_base
        segment = batch_fs.read_file(f"/data/commitlog/{segment_base:020d}")
        assert segment[position : position + result.size] == record
    assert log
    # ConsumeQueue units, key index entries: the same files, byte for byte
    assert _files(batch_fs) == _files(single_fs)
    for key in ("k1", "k2", "k3", "id-a", "id-b"):
        assert batched.query_by_key(key, 64) == single.query_by_key(key, 64)
    for topic in ("T", "U"):
        for queue_id in (0, 1, 3):
            a = batched.read_queue(topic, queue_id, 0, 64)
            b = single.read_queue(topic, queue_id, 0, 64)
            assert (a.status, a.records, a.next_offset) == (b.status, b.records, b.next_offset)


@settings(max_examples=50, deadline=None)
@given(batch=st.lists(requests, min_size=2, max_size=8), first=st.integers(0, 3))
def test_a_batch_after_a_replayed_prefix_is_dispatched_like_singles(
    batch: list[PutRequest], first: int
) -> None:
    """Reopening a store replays the log's tail into queues and index that may already hold part of it;
    a batch appended afterwards continues the same queues exactly as singles do."""
    single_fs, batch_fs = FaultyFileSystem(), FaultyFileSystem()
    for fs in (single_fs, batch_fs):
        store = _open(fs)
        for req in batch[:first]:
            store.put_nowait(req)
        store.flush()
    single, batched = _open(single_fs), _open(batch_fs)
    for req in batch:
        single.put_nowait(req)
    batched.put_batch_nowait(batch)
    single.flush()
    batched.flush()
    assert _files(batch_fs) == _files(single_fs)


def test_a_batch_that_cannot_be_encoded_takes_no_queue_offset() -> None:
    """The CommitLog takes a batch's queue offsets only once it is encoded: a field out of its on-disk
    width (the store's checks reject it first; the log does not rely on that) leaves no gap."""
    fs = FaultyFileSystem()
    store = _open(fs)
    good = _fields(PutRequest("T", 0, b"ok"))
    bad = good._replace(flag=1 << 40)
    with pytest.raises(struct.error):
        store._log.append_records("T", [good, bad])
    with pytest.raises(struct.error):
        store._log.append([("T", good), ("U", bad)])
    appended, _ = store.put_records_nowait("T", [good, good])
    assert [a.queue_offset for a in appended] == [0, 1]
    assert appended[0].physical_offset == 0
    store.flush()
    assert [r.body for r in store.read_queue("T", 0, 0, 8).records] == [b"ok", b"ok"]


fields_strategy = st.builds(
    codec.RecordFields,
    topic=st.sampled_from([b"T", b"Topic", b"TopicLonger"]),
    queue_id=st.integers(0, 7),
    body=st.binary(max_size=64),
    properties=st.binary(max_size=24),
    tags_code=st.integers(-(1 << 63), (1 << 63) - 1),
    flag=st.integers(-(1 << 31), (1 << 31) - 1),
    sys_flag=st.integers(-(1 << 31), (1 << 31) - 1),
    born_timestamp_ms=st.integers(-(1 << 63), (1 << 63) - 1),
    born_host=st.sampled_from([b"", b"h:1", b"host:4", b"10.0.0.2:5555"]),
    reconsume_times=st.integers(-(1 << 31), (1 << 31) - 1),
    prepared_transaction_offset=st.integers(-(1 << 63), (1 << 63) - 1),
    index_keys=st.just(()),
)


def _encode_each(records: list[codec.RecordFields], offsets: list[int], first_queue_offset: int) -> bytes:
    return b"".join(
        codec.encode(
            r,
            store_host=STORE_HOST.encode(),
            queue_offset=first_queue_offset + i,
            physical_offset=offset,
            store_timestamp_ms=NOW_MS,
        )
        for i, (r, offset) in enumerate(zip(records, offsets, strict=True))
    )


def _encode_batch(
    records: list[codec.RecordFields], pos: int, physical: int, first_queue_offset: int
) -> tuple[bytes, list[int]]:
    cols = codec.columns(records)
    sizes = codec.batch_sizes(cols, STORE_HOST.encode())
    buf = bytearray(b"\xee" * (pos + sum(sizes) + 5))
    offsets = codec.encode_batch_into(
        buf, pos, physical, cols, sizes, store_host=STORE_HOST.encode(),
        queue_offsets=range(first_queue_offset, first_queue_offset + len(records)), store_timestamp_ms=NOW_MS,
    )  # fmt: skip
    assert buf[:pos] == b"\xee" * pos and buf[pos + sum(sizes) :] == b"\xee" * 5  # nothing written outside
    assert offsets == [physical + sum(sizes[:i]) for i in range(len(records))]
    return bytes(buf[pos : pos + sum(sizes)]), offsets


@settings(max_examples=300, deadline=None)
@given(records=st.lists(fields_strategy, min_size=1, max_size=10), pos=st.integers(0, 9),
       physical=st.integers(0, 1 << 40), first=st.integers(0, 1 << 40))  # fmt: skip
def test_encode_batch_into_writes_what_encode_writes_record_by_record(
    records: list[codec.RecordFields], pos: int, physical: int, first: int
) -> None:
    data, offsets = _encode_batch(records, pos, physical, first)
    assert data == _encode_each(records, offsets, first)


def test_encode_batch_into_lays_out_records_whose_names_and_properties_trade_lengths() -> None:
    """Records of one size whose names part and properties split it differently (topic 3 bytes longer,
    properties 3 shorter) each get their own layout: a layout picked by size alone would misplace
    the properties' length and the names' end."""
    a = codec.RecordFields(b"T", 0, b"body", b"K\x01vvvv\x02", 1, 0, 0, NOW_MS, b"h:1", 0, 0, ())
    b = a._replace(topic=b"Tpic", properties=b"K\x01v\x02")
    c = a._replace(born_host=b"h:1234", properties=b"K\x01v\x02")
    records = [a, b, c, a, c, b]
    sizes = codec.batch_sizes(codec.columns(records), STORE_HOST.encode())
    assert len(set(sizes)) == 1  # the same size every time: only the split differs
    data, offsets = _encode_batch(records, 3, 1000, 7)
    assert data == _encode_each(records, offsets, 7)
    decoded = [codec.decode(data, offset - 1000, offset=offset) for offset in offsets]
    assert [(r.topic.encode(), r.born_host.encode(), r.properties, r.body) for r in decoded] == [
        (r.topic, r.born_host, r.properties, r.body) for r in records
    ]


def _open_small(fs: FaultyFileSystem) -> MessageStore:
    config = StoreConfig(
        data_dir="/data", flush_mode=FlushMode.ASYNC, segment_bytes=4096, store_host=STORE_HOST
    )
    return MessageStore.open(config, fs=fs, clock=FakeClock(start_ms=NOW_MS), index_keys=index_keys)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    batches=st.lists(
        st.lists(requests, min_size=1, max_size=limits.append_small_batch), min_size=1, max_size=24
    ),
    known_keys=st.booleans(),
)
def test_small_batches_append_as_the_columnar_path(batches: list[list[PutRequest]], known_keys: bool) -> None:
    """A batch of at most ``limits.append_small_batch`` records (a commit's message and op record) is
    encoded record by record (``CommitLog._append_few``): the same results, log bytes, segment rolls
    (a batch never split over two segments), queues and index as the columnar path."""
    batches = [[_with_known_keys(r, known_keys) for r in b] for b in batches]
    few_fs, columns_fs = FaultyFileSystem(), FaultyFileSystem()
    few, columnar = _open_small(few_fs), _open_small(columns_fs)
    for batch in batches:
        pairs = [(r.topic, _fields(r)) for r in batch]
        got = few._log.append(pairs)
        expected = columnar._log.append_records([t for t, _ in pairs], [f for _, f in pairs]).results()
        assert got == expected
        assert len({r.physical_offset // 4096 for r in got}) == 1  # one segment
    few.flush()
    columnar.flush()
    assert _files(few_fs) == _files(columns_fs)
    for key in ("k1", "k2", "k3", "id-a", "id-b"):
        assert few.query_by_key(key, 64) == columnar.query_by_key(key, 64)


def test_a_small_batch_that_does_not_fit_its_segment_rolls_whole() -> None:
    """The second record of a pair would cross the segment's end: both go to the next segment."""
    fs = FaultyFileSystem()
    store = _open_small(fs)
    filler = _fields(PutRequest("T", 0, b"x" * 3000))
    store._log.append_one("T", filler)
    pair = [("T", _fields(PutRequest("T", 0, b"a" * 400))), ("U", _fields(PutRequest("U", 0, b"b" * 400)))]
    first, second = store._log.append(pair)
    assert first.physical_offset == 4096 and second.physical_offset == 4096 + first.size
    assert (first.queue_offset, second.queue_offset) == (1, 0)
    store.flush()
    assert [r.body for r in store.read_queue("T", 0, 0, 8).records] == [b"x" * 3000, b"a" * 400]
    assert [r.body for r in store.read_queue("U", 0, 0, 8).records] == [b"b" * 400]


@settings(max_examples=300, deadline=None)
@given(
    template=fields_strategy,
    parts=st.lists(
        st.tuples(
            st.sampled_from([b"", b"U\x01a\x02", b"U\x01b\x02", b"U\x01abc\x02"]), st.binary(max_size=64)
        ),
        min_size=1,
        max_size=10,
    ),
    pos=st.integers(0, 9),
    physical=st.integers(0, 1 << 40),
    first=st.integers(0, 1 << 40),
)
def test_a_uniform_batch_encodes_as_records_one_by_one(
    template: codec.RecordFields, parts: list[tuple[bytes, bytes]], pos: int, physical: int, first: int
) -> None:
    """A batch whose records share every header field but properties and body (the send lane's: one
    queue, one clock reading, no flags) is packed with those fields laid out once; the bytes are still
    ``codec.encode``'s record by record, also when the properties change length mid-batch."""
    records = [template._replace(properties=props, body=body) for props, body in parts]
    data, offsets = _encode_batch(records, pos, physical, first)
    assert data == _encode_each(records, offsets, first)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(codec.RECORD_BYTES_MIN, 4096), min_size=1, max_size=40),
    codes=st.one_of(
        st.integers(-(1 << 63), (1 << 63) - 1).map(lambda code: [code]),  # one code for the whole run
        st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=2, max_size=3),
    ),
    units_per_file=st.integers(1, 16),
)
def test_a_run_of_units_writes_the_units_put_one_by_one(
    sizes: list[int], codes: list[int], units_per_file: int
) -> None:
    """``ConsumeQueue.put_run`` (one pack for a batch's units) leaves the files ``put`` unit by unit
    leaves, whether the run has one tags code or several, across file rolls."""
    offsets = [1000 + sum(sizes[:i]) for i in range(len(sizes))]
    tags = [codes[i % len(codes)] for i in range(len(sizes))]
    run_fs, each_fs = FaultyFileSystem(), FaultyFileSystem()
    run, each = ConsumeQueue(run_fs, "/q", units_per_file), ConsumeQueue(each_fs, "/q", units_per_file)
    assert run.put_run(0, offsets, sizes, tags)
    for i, (offset, size, code) in enumerate(zip(offsets, sizes, tags, strict=True)):
        assert each.put(i, offset, size, code)
    run.write()
    each.write()
    assert _files(run_fs) == _files(each_fs)
    assert run.max_physical_offset == each.max_physical_offset == offsets[-1]


@pytest.mark.parametrize("few", [True, False])
def test_a_group_that_fills_its_segment_exactly_is_written_to_that_segment(few: bool) -> None:
    """Records buffered in one group end on the segment's last byte, and the next append rolls: the
    buffered records are written to their own segment before the new one becomes the active one (they
    went to the new segment's file before, where no offset pointed at them)."""
    fs = FaultyFileSystem()
    store = _open_small(fs)
    first = store._log.append_one("T", _fields(PutRequest("T", 0, b"x" * 1000)))
    empty = codec.encoded_size(b"T", b"", STORE_HOST.encode(), b"", b"")  # a record's size without body
    exact = _fields(PutRequest("T", 0, b"y" * (4096 - first.size - empty)))
    if few:
        (second,) = store._log.append([("T", exact)])
        (third,) = store._log.append([("T", _fields(PutRequest("T", 0, b"z" * 10)))])
    else:
        (second,) = store._log.append_records(["T"], [exact]).results()
        (third,) = store._log.append_records(["T"], [_fields(PutRequest("T", 0, b"z" * 10))]).results()
    assert second.physical_offset + second.size == 4096  # the segment is full to its last byte
    assert third.physical_offset == 4096
    store.flush()
    bodies = [b"x" * 1000, b"y" * len(exact.body), b"z" * 10]
    assert [r.body for r in store.read_queue("T", 0, 0, 8).records] == bodies
    segment_files = sorted(p for p in fs.files if "/commitlog/" in p)
    assert [len(fs.read_file(p)) for p in segment_files] == [4096, third.size]
