"""The fused pull read's header fields (``codec._u32_at`` / ``_i32_at`` / ``_i64_at``, C integers when
compiled) are exactly what ``struct`` unpacks, and ``check_into`` hands the sink exactly the stored
header's values (``HEADER.unpack_from``), extremes and negative values included."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.protocol.remoting.message_codec import decode_pulled
from txmq.server.remoting.convert import PullSink
from txmq.storage import codec


@settings(max_examples=500, derandomize=True)
@given(data=st.binary(min_size=8, max_size=40), at=st.integers(0, 32))
def test_header_ints_are_what_struct_unpacks(data: bytes, at: int) -> None:
    at = at % (len(data) - 7)
    assert codec._u32_at(data, at) == struct.unpack_from(">I", data, at)[0]
    assert codec._i32_at(data, at) == struct.unpack_from(">i", data, at)[0]
    assert codec._i64_at(data, at) == struct.unpack_from(">q", data, at)[0]


def test_header_ints_at_the_edges() -> None:
    for raw in (
        b"\x00" * 8,
        b"\xff" * 8,
        b"\x80" + b"\x00" * 7,
        b"\x7f" + b"\xff" * 7,
        b"\x00\x00\x00\x01" * 2,
    ):
        assert codec._u32_at(raw, 0) == struct.unpack(">I", raw[:4])[0]
        assert codec._i32_at(raw, 4) == struct.unpack(">i", raw[4:])[0]
        assert codec._i64_at(raw, 0) == struct.unpack(">q", raw)[0]


def _no_general(offset: int) -> bytes:
    raise AssertionError(f"the record at {offset} takes the fused path")


@settings(max_examples=200, derandomize=True)
@given(
    queue_id=st.integers(-(2**31), 2**31 - 1),
    queue_offset=st.integers(-(2**63), 2**63 - 1),
    physical_offset=st.integers(-(2**63), 2**63 - 1),
    born_ts=st.integers(-(2**63), 2**63 - 1),
    store_ts=st.integers(-(2**63), 2**63 - 1),
    reconsume=st.integers(-(2**31), 2**31 - 1),
    tags_code=st.integers(-(2**63), 2**63 - 1),
)
def test_check_into_hands_the_sink_the_stored_header_values(
    queue_id: int, queue_offset: int, physical_offset: int, born_ts: int, store_ts: int, reconsume: int,
    tags_code: int,
) -> None:  # fmt: skip
    fields = codec.RecordFields(
        b"T", queue_id, b"body", b"", tags_code, 0, 0, born_ts, b"1.2.3.4:5", reconsume, 0
    )
    record = codec.encode(
        fields, store_host=b"9.8.7.6:1", queue_offset=queue_offset, physical_offset=physical_offset,
        store_timestamp_ms=store_ts,
    )  # fmt: skip
    header = codec.HEADER.unpack_from(record, 0)
    sink = PullSink("T", _no_general)  # a compiled class: the test cannot subclass RecordSink
    assert codec.check_into(
        record,
        0,
        memoryview(record),
        physical_offset,
        len(record),
        queue_id,
        queue_offset,
        tags_code,
        b"T",
        sink,
    )
    [pulled] = decode_pulled(sink.body())  # the wire record carries what the sink was handed
    taken = (pulled[3], pulled[4], pulled[5], pulled[6], pulled[8], pulled[10])
    assert taken == (header[3], header[5], header[6], header[8], header[9], header[11])
    assert taken == (queue_id, queue_offset, physical_offset, born_ts, store_ts, reconsume)
    # the unit's values compared as the stored ones: one off in any of them is refused
    for args in (
        (physical_offset ^ 1, len(record), queue_id, queue_offset, tags_code),
        (physical_offset, len(record), queue_id ^ 1, queue_offset, tags_code),
        (physical_offset, len(record), queue_id, queue_offset ^ 1, tags_code),
        (physical_offset, len(record), queue_id, queue_offset, tags_code ^ 1),
    ):
        assert not codec.check_into(record, 0, memoryview(record), *args, b"T", sink)
    assert sink.count == 1
