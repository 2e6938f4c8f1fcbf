"""protocol/remoting/compression: a 4.x client's deflated body is stored as the producer had it."""

from __future__ import annotations

import zlib

import pytest

from txmq.common import errors, limits
from txmq.protocol.remoting.compression import COMPRESSED_FLAG, inflate


@pytest.mark.parametrize("type_bits", [0, 3 << 8])  # an old client's (no type) and zlib's
def test_a_zlib_body_inflates_to_what_was_sent(type_bits: int) -> None:
    body = b"".join(b"line-%d;" % i for i in range(1000))
    assert inflate(zlib.compress(body, 5), COMPRESSED_FLAG | type_bits) == body


@pytest.mark.parametrize(("type_bits", "name"), [(1 << 8, "LZ4"), (2 << 8, "ZSTD")])
def test_another_codec_is_refused_by_name(type_bits: int, name: str) -> None:
    with pytest.raises(errors.InvalidArgument, match=f"{name}-compressed"):
        inflate(b"\x00" * 16, COMPRESSED_FLAG | type_bits)


def test_a_body_that_does_not_inflate_is_refused() -> None:
    with pytest.raises(errors.InvalidArgument, match="does not inflate"):
        inflate(b"not zlib at all", COMPRESSED_FLAG)
    with pytest.raises(errors.InvalidArgument, match="truncated"):
        inflate(zlib.compress(b"x" * 10_000)[:-6], COMPRESSED_FLAG)


def test_a_body_inflating_past_the_limit_is_too_large_without_inflating_it_all() -> None:
    bomb = zlib.compress(b"\x00" * (limits.body_bytes_max + 1024), 9)
    with pytest.raises(errors.MessageTooLarge):
        inflate(bomb, COMPRESSED_FLAG)
    exact = zlib.compress(b"\x00" * limits.body_bytes_max, 9)
    assert len(inflate(exact, COMPRESSED_FLAG)) == limits.body_bytes_max
