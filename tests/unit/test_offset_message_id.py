"""Offset message ids (host, port, commit-log offset as 32 hex digits): parsed back, or None."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from txmq.common import msgid


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1))
def test_an_offset_message_id_parses_back(port: int, offset: int) -> None:
    text = msgid.offset_message_id("10.0.0.1", port, offset)
    assert msgid.parse_offset_message_id(text) == ("10.0.0.1", port, offset)


def test_an_id_of_32_characters_with_spaces_is_not_an_offset_message_id() -> None:
    # bytes.fromhex skips whitespace: these 32 characters are 14 bytes, not 16 (struct.error before)
    assert msgid.parse_offset_message_id("0A 00 00 01 00002A9F000000000000") is None
    assert msgid.parse_offset_message_id(" " * 32) is None


@given(st.text(alphabet="0123456789abcdefABCDEF \t\n", min_size=32, max_size=32))
def test_any_32_characters_parse_or_give_none(text: str) -> None:
    parsed = msgid.parse_offset_message_id(text)
    assert parsed is None or len(parsed) == 3
