"""``codec.split_checked`` (the pull path's record read) refuses a record whose magic, stored size,
stored physical offset or CRC32C does not check out, each on its own, and returns the raw fields of
a good one."""

from __future__ import annotations

import pytest

from txmq.storage import codec
from txmq.storage.api import RecordFields

OFFSET = 4096
FIELDS = RecordFields(
    b"T", 2, b"body" * 50, b"KEYS\x01k\x02", 7, 0, 0, 1_800_000_000_000, b"10.0.0.7:1", 0, 0
)


def _record() -> bytes:
    return codec.encode(
        FIELDS, store_host=b"10.0.0.9:10911", queue_offset=5, physical_offset=OFFSET, store_timestamp_ms=9
    )


def _check(buf: bytes) -> codec.RawRecord | None:
    return codec.split_checked(buf, 0, memoryview(buf), OFFSET, len(_record()), 2, 5, 7, b"T")


def test_a_good_record_gives_its_fields() -> None:
    fields = _check(_record())
    assert fields is not None
    assert fields[0] == len(_record()) and fields[1] == 2 and fields[3] == 5 and fields[4] == OFFSET
    assert fields[8] == 7 and bytes(fields[13]) == FIELDS.body and fields[12] == FIELDS.properties


@pytest.mark.parametrize(
    ("field", "start"),
    [("magic", 0), ("size", 4), ("crc", 8), ("physical offset", 32), ("body", codec.HEADER_BYTES + 80)],
)
def test_each_damaged_header_field_is_refused(field: str, start: int) -> None:
    for bit in (0, 3, 7):
        raw = bytearray(_record())
        raw[start + 3] ^= 1 << bit  # a flipped bit (in the low byte of the 4-byte fields)
        assert _check(bytes(raw)) is None, field


def test_a_unit_naming_another_offset_or_size_is_refused() -> None:
    buf = _record()
    view = memoryview(buf)
    assert codec.split_checked(buf, 0, view, OFFSET + 8, len(buf), 2, 5, 7, b"T") is None
    assert codec.split_checked(buf, 0, view, OFFSET, len(buf) - 1, 2, 5, 7, b"T") is None
