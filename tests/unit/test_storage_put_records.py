"""put_records_nowait (the send lane's way in) checks and stores exactly what put_nowait /
put_batch_nowait do for the same records, and indexes the keys it is handed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from txmq.broker.records import index_keys
from txmq.common import limits
from txmq.common.clock import FakeClock
from txmq.common.errors import InvalidArgument, TxmqError
from txmq.storage import codec
from txmq.storage.api import AppendResult, FlushMode, PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore


def _open() -> MessageStore:
    config = StoreConfig(data_dir="/data", flush_mode=FlushMode.ASYNC, segment_bytes=1 << 20)
    return MessageStore.open(
        config, fs=FaultyFileSystem(), clock=FakeClock(start_ms=1_700_000_000_000), index_keys=index_keys
    )


requests = st.builds(
    PutRequest,
    topic=st.sampled_from(["T", "T", "U", "bad topic"]),
    queue_id=st.sampled_from([0, 1, -1, limits.queue_id_max + 1]),
    body=st.sampled_from([b"b", b"body" * 10, b"x" * (limits.body_bytes_max + 1)]),
    properties=st.sampled_from(
        [b"", b"KEYS\x01k1 k2\x02", b"\xff\xfe", b"p" * (limits.properties_bytes_max + 1)]
    ),
    tags_code=st.sampled_from([0, 7, 1 << 63]),
    born_timestamp_ms=st.integers(0, 1 << 40),
    born_host=st.sampled_from(["", "10.0.0.1:1", "h" * 256]),
)


def _fields(req: PutRequest) -> codec.RecordFields:
    keys = tuple(index_keys(req.topic, req.properties))  # what the store's IndexKeysFn finds
    return codec.RecordFields(
        req.topic.encode(), req.queue_id, req.body, req.properties, req.tags_code, req.flag, req.sys_flag,
        req.born_timestamp_ms, req.born_host.encode(), req.reconsume_times, req.prepared_transaction_offset,
        keys,
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(reqs=st.lists(requests, min_size=1, max_size=2))
def test_put_records_matches_put(reqs: list[PutRequest]) -> None:
    reqs = [dataclasses.replace(r, topic=reqs[0].topic) for r in reqs]  # put_records_nowait takes one topic
    general, lane = _open(), _open()
    expected: list[AppendResult] | tuple[type, str]
    got: list[AppendResult] | tuple[type, str]
    try:
        expected = general.put_batch_nowait(reqs)[0] if len(reqs) > 1 else [general.put_nowait(reqs[0])[0]]
    except TxmqError as exc:
        expected = (type(exc), exc.message.partition(": ")[0])  # the rest may show the request
    try:
        got = lane.put_records_nowait(reqs[0].topic, [_fields(r) for r in reqs])[0]
    except TxmqError as exc:
        got = (type(exc), exc.message.partition(": ")[0])
    assert got == expected
    event("stored" if isinstance(got, list) else f"rejected {got[0].__name__}")
    if isinstance(got, list):
        general.flush()
        lane.flush()
        for result in got:
            assert lane.read(result.physical_offset) == general.read(result.physical_offset)
        assert lane.query_by_key("k2", 8) == general.query_by_key("k2", 8)


def test_records_must_name_the_topic_they_are_put_under() -> None:
    fields = codec.RecordFields(b"T", 0, b"b", b"", 0, 0, 0, 0, b"", 0, 0)
    with pytest.raises(InvalidArgument, match="not 'U'"):
        _open().put_records_nowait("U", [fields])


def test_put_columns_stores_what_put_records_stores_and_checks_record_by_record() -> None:
    """The send lane's batch hands the store columns: the same records, results and errors as rows."""
    rows = [_fields(PutRequest("T", i % 2, b"body%d" % i, b"KEYS\x01k%d\x02" % i)) for i in range(5)]
    by_rows, by_columns = _open(), _open()
    expected = by_rows.put_records_nowait("T", rows)[0]
    appended, _ = by_columns.put_columns("T", codec.columns(rows))
    assert appended.results() == expected
    by_rows.flush()
    by_columns.flush()
    assert [by_columns.read(r.physical_offset) for r in expected] == [
        by_rows.read(r.physical_offset) for r in expected
    ]
    bad = [*rows[:2], rows[2]._replace(queue_id=-1), *rows[3:]]
    with pytest.raises(InvalidArgument, match="queue id -1"):
        by_columns.put_columns("T", codec.columns(bad))
    with pytest.raises(InvalidArgument, match="at least one"):
        by_columns.put_columns("T", ())
    assert by_columns.max_offset("T", 0) == 3  # the rejected batch took nothing
