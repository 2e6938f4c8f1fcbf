"""CommitLog record codec: round trips three ways (whole, byte by byte, with trailing garbage) and
bit-flip detection anywhere in a record."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.common.errors import CorruptRecord
from txmq.storage import codec
from txmq.storage.api import StoredRecord

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
fields_st = st.builds(
    codec.RecordFields,
    topic=st.text("abcXYZ09_-%|", min_size=1, max_size=40).map(str.encode),
    queue_id=st.integers(0, 1023),
    body=st.binary(max_size=300),
    properties=st.text(max_size=60).map(str.encode),
    tags_code=I64,
    flag=I32,
    sys_flag=I32,
    born_timestamp_ms=I64,
    born_host=st.text("0123456789.:", max_size=21).map(str.encode),
    reconsume_times=I32,
    prepared_transaction_offset=I64,
)


def _encode_many(fields: list[codec.RecordFields], start: int = 0) -> tuple[bytes, list[int]]:
    out = bytearray()
    offsets = []
    for i, f in enumerate(fields):
        offsets.append(start + len(out))
        out += codec.encode(f, store_host=b"10.0.0.1:10911", queue_offset=i, physical_offset=start + len(out),
                            store_timestamp_ms=1_700_000_000_000 + i)  # fmt: skip
    return bytes(out), offsets


def _check(record: StoredRecord, f: codec.RecordFields, offset: int, queue_offset: int) -> None:
    assert record.physical_offset == offset
    assert record.queue_offset == queue_offset
    assert record.topic.encode() == f.topic
    assert (record.queue_id, record.body, record.properties) == (f.queue_id, f.body, f.properties)
    assert (record.tags_code, record.flag, record.sys_flag) == (f.tags_code, f.flag, f.sys_flag)
    assert record.born_timestamp_ms == f.born_timestamp_ms
    assert record.born_host.encode() == f.born_host
    assert record.store_host == "10.0.0.1:10911"
    assert record.reconsume_times == f.reconsume_times
    assert record.prepared_transaction_offset == f.prepared_transaction_offset
    assert record.store_timestamp_ms == 1_700_000_000_000 + queue_offset


@given(st.lists(fields_st, min_size=1, max_size=4), st.integers(0, 10_000))
def test_round_trip_whole(fields: list[codec.RecordFields], start: int) -> None:
    data, offsets = _encode_many(fields, start)
    for i, (f, offset) in enumerate(zip(fields, offsets, strict=True)):
        record = codec.decode(data, offset - start, offset=offset)
        _check(record, f, offset, i)
        assert record.size == len(codec.encode(f, store_host=b"10.0.0.1:10911", queue_offset=i,
                                               physical_offset=offset, store_timestamp_ms=0))  # fmt: skip


@settings(max_examples=40)
@given(st.lists(fields_st, min_size=1, max_size=3), st.binary(max_size=40))
def test_byte_at_a_time_with_trailing_garbage(fields: list[codec.RecordFields], garbage: bytes) -> None:
    data, offsets = _encode_many(fields)
    reader = codec.RecordReader(0)
    decoded: list[StoredRecord] = []
    for position, byte in enumerate(data):
        reader.feed(bytes([byte]))
        item = reader.next()
        if item is codec.NEED_MORE:
            continue
        assert isinstance(item, StoredRecord)
        decoded.append(item)
        assert position + 1 == offsets[len(decoded) - 1] + item.size, "no record appears too early"
        assert reader.next() is codec.NEED_MORE
    assert len(decoded) == len(fields)
    for i, (record, f) in enumerate(zip(decoded, fields, strict=True)):
        _check(record, f, offsets[i], i)
    reader.feed(garbage)
    try:
        item = reader.next()
    except CorruptRecord:
        return  # garbage is rejected, never decoded as a record
    assert item is codec.NEED_MORE or isinstance(item, codec.Blank)
    if item is codec.NEED_MORE:
        assert reader.pending == garbage


@given(fields_st, st.data())
def test_any_flipped_bit_is_detected(f: codec.RecordFields, data: st.DataObject) -> None:
    encoded = bytearray(codec.encode(f, store_host=b"h", queue_offset=3, physical_offset=64,
                                     store_timestamp_ms=5))  # fmt: skip
    bit = data.draw(st.integers(0, len(encoded) * 8 - 1))
    encoded[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptRecord) as info:
        codec.decode(encoded, 0, offset=64)
    assert info.value.offset == 64


def test_rejections_name_the_reason() -> None:
    f = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 0, b"", 0, 0)
    good = codec.encode(f, store_host=b"h", queue_offset=0, physical_offset=0, store_timestamp_ms=0)
    cases = {
        "bad magic": b"\x00\x00\x00\x00" + good[4:],
        "out of bounds": good[:4] + (10).to_bytes(4, "big") + good[8:],
        "cut short": good[:-1],
        "CRC mismatch": good[:-1] + bytes([good[-1] ^ 1]),
    }
    for reason, data in cases.items():
        with pytest.raises(CorruptRecord, match=reason):
            codec.decode(data, 0, offset=0)
    with pytest.raises(CorruptRecord, match="misdirected"):
        codec.decode(good, 0, offset=128)


def test_inner_lengths_inconsistent_is_rejected_even_with_a_valid_crc() -> None:
    import crc32c

    f = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 0, b"", 0, 0)
    data = bytearray(
        codec.encode(f, store_host=b"h", queue_offset=0, physical_offset=0, store_timestamp_ms=0)
    )
    data[codec.HEADER_BYTES : codec.HEADER_BYTES + 2] = (200).to_bytes(2, "big")  # topic length too big
    data[8:12] = crc32c.crc32c(bytes(data[12:])).to_bytes(4, "big")
    with pytest.raises(CorruptRecord, match="inner lengths"):
        codec.decode(data, 0, offset=0)


def test_blank_marker_ends_a_segment_in_the_reader() -> None:
    reader = codec.RecordReader(100)
    reader.feed(codec.encode_blank(28))
    item = reader.next()
    assert item == codec.Blank(28)
    assert reader.offset == 128
