"""``txmq.common.crc.crc32`` is zlib's CRC-32 whichever implementation was picked (ISA-L when the
``isal`` package is installed), and the body CRC the broker writes into pulled records is RocketMQ's."""

from __future__ import annotations

import os
import zlib

import pytest

from txmq.common import crc
from txmq.protocol.remoting.message_codec import body_crc, decode_messages

from ..pull_oracle import encode_pulled


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 63, 64, 65, 1024, 4099, 70_000])
def test_crc32_is_zlibs(size: int) -> None:
    data = os.urandom(size)
    assert crc.crc32(data) == zlib.crc32(data)
    assert crc.crc32(memoryview(data)[size // 3 :]) == zlib.crc32(memoryview(data)[size // 3 :])
    assert crc.crc32(data, 0xDEADBEEF) == zlib.crc32(data, 0xDEADBEEF)
    assert crc.IMPLEMENTATION in {"isal", "zlib"}


HOST = bytes([127, 0, 0, 1])


def test_pulled_records_carry_rocketmqs_body_crc() -> None:
    bodies = [os.urandom(n) for n in (0, 5, 1024, 3000)]
    records = [
        (memoryview(b), b"TAGS\x01t\x02", 1, i, 100 * i, 1, HOST, 5, 2, HOST, 10911, 0)
        for i, b in enumerate(bodies)
    ]
    decoded = decode_messages(encode_pulled("T", records))  # type: ignore[arg-type]
    assert [m.body_crc for m in decoded] == [zlib.crc32(b) & 0x7FFFFFFF for b in bodies]
    assert [body_crc(b) for b in bodies] == [zlib.crc32(b) & 0x7FFFFFFF for b in bodies]
