"""``msgid.offset_of_offset_message_id`` (a half's view and its END_TRANSACTION read only the offset)
answers what ``parse_offset_message_id(...)[2]`` answers, None where that is None, for any text; and so
does its C twin ``_batchsend.offset_id_offset`` (used by ``_transaction.half_view_at``)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from txmq.client import _single
from txmq.common import msgid


def _reference(text: str) -> int | None:
    parsed = msgid.parse_offset_message_id(text)
    return None if parsed is None else parsed[2]


_HEX = st.text("0123456789abcdefABCDEF", min_size=32, max_size=32)
_NEAR = st.builds(
    lambda text, at, ch: text[:at] + ch + text[at + 1 :],
    _HEX,
    st.integers(0, 31),
    st.sampled_from([*"xXgGzZ_ -+.\t\n é٣", "0x", "  ", "00"]),
)


@given(_HEX | _NEAR | st.text(max_size=40))
@example("7F00000100002A9F0000000000000000")
@example("7F00000100002A9F8000000000000000")
@example("7F00000100002A9FFFFFFFFFFFFFFFFF")
@example("0x00000100002A9F0000000000000001")
@example("7F00000100002A9F0x00000000000001")
@example("7F000001 0002A9F0000000000000001")
@example("+F00000100002A9F0000000000000001")
@example("7F00000100002A9F000000000000000_")
@example("7F00000100002A9F00000000000000٣1")
def test_the_offset_is_the_parsed_ids(text: str) -> None:
    assert msgid.offset_of_offset_message_id(text) == _reference(text)


@given(st.integers(-(2**63), 2**63 - 1), st.integers(0, 65535))
def test_an_id_made_for_an_offset_gives_it_back(offset: int, port: int) -> None:
    made = msgid.offset_message_id("10.1.2.3", port, offset)
    assert msgid.offset_of_offset_message_id(made) == offset
    assert msgid.offset_of_offset_message_id(made.lower()) == offset


_C_OFFSET = _single.OFFSET_ID_OFFSET


@pytest.mark.skipif(_C_OFFSET is None, reason="the C extension is not built (pure Python)")
@given(_HEX | _NEAR | st.text(max_size=40))
@example("7F00000100002A9F0000000000000000")
@example("7F00000100002A9F8000000000000000")
@example("7F00000100002A9FFFFFFFFFFFFFFFFF")
@example("0x00000100002A9F0000000000000001")
@example("7F00000100002A9F00000000000000٣1")
@example("7f00000100002a9fffffffffffffffff")
def test_the_c_offset_is_the_references(text: str) -> None:
    """``_batchsend.offset_id_offset`` (``_transaction.half_view_at``'s, for an exact str) answers what
    ``offset_of_offset_message_id`` answers, None included."""
    assert _C_OFFSET(text) == msgid.offset_of_offset_message_id(text)


@pytest.mark.skipif(_C_OFFSET is None, reason="the C extension is not built (pure Python)")
def test_the_c_offset_takes_only_an_exact_str() -> None:
    class Text(str):
        pass

    text = "7F00000100002A9F0000000000000001"
    assert _C_OFFSET(text) == 1
    for other in (Text(text), text.encode(), None, 1):
        assert _C_OFFSET(other) is None
    with pytest.raises(TypeError):
        _C_OFFSET()
