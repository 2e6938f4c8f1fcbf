"""``checks.check_lean`` (one compiled pass over a request's messages, message by message only when one
may fail or has a key to split) against the reference it stands for: ``check_fields`` of each message
in order (the first failure raised) and its keys as ``split_keys`` stores them."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.common import errors
from txmq.common.message import LeanMessage
from txmq.protocol.grpc import checks

# short texts that reach every branch: spaces, '|', control characters (C0, DEL, C1), non-ASCII,
# whitespace only, empty, long enough for the 64-byte group limit
_PIECE = st.sampled_from(["a", "b", " ", "|", "\x00", "\x1f", "\x7f", "\x85", "é", "标", "\t", "\u3000"])
_TEXT = st.one_of(
    st.lists(_PIECE, max_size=4).map("".join),
    st.sampled_from(["g" * 63, "g" * 64, "é" * 31, "é" * 32, "tag", "id-1"]),
)
_OPTIONAL = st.one_of(st.none(), _TEXT)


@st.composite
def _message(draw: st.DrawFn) -> LeanMessage:
    plain = draw(st.booleans())  # about half the messages as clients send them: nothing to refuse
    if plain:
        return LeanMessage(
            b"x",
            {},
            draw(st.sampled_from([None, "", "tag", "t2"])),
            draw(st.sampled_from([(), ("k1",), ("k1", "k2")])),
            draw(st.sampled_from(["id-1", "id-2"])),
            draw(st.sampled_from([None, "", "g1"])),
        )
    user = draw(st.dictionaries(_TEXT, _TEXT, max_size=2))
    keys = tuple(draw(st.lists(_TEXT, max_size=3)))
    return LeanMessage(b"x", user, draw(_OPTIONAL), keys, draw(_OPTIONAL), draw(_OPTIONAL))


def _reference(messages: list[LeanMessage]) -> Any:
    """What the door answers for these messages: the first error, or each message's keys as stored."""
    stored = []
    for m in messages:
        try:
            checks.check_fields(m.tags or "", m.keys, m.message_group or "", m.properties, m.message_id or "")
        except errors.TxmqError as exc:
            return type(exc), str(exc)
        stored.append(checks.split_keys(m.keys) or m.keys)
    return stored


@settings(max_examples=500, deadline=None)
@given(st.lists(_message(), min_size=1, max_size=5))
@example([LeanMessage(b"x", {}, "g" * 64, (), "id", "g" * 64)])  # a tag passing is no group passing
@example([LeanMessage(b"x", {}, "t", (), "id", None), LeanMessage(b"x", {}, "t", (), "id", "g" * 64)])
def test_check_lean_is_check_fields_message_by_message(messages: list[LeanMessage]) -> None:
    before = list(messages)
    try:
        checked = checks.check_lean(messages)
    except errors.TxmqError as exc:
        got: Any = (type(exc), str(exc))
    else:
        got = [m.keys for m in checked]
        assert [m._replace(keys=()) for m in checked] == [m._replace(keys=()) for m in messages]
        if all(key and " " not in key for m in messages for key in m.keys):
            assert checked is messages  # no key to split: the same list, no copy
    assert got == _reference(messages)
    assert messages == before  # the caller's list is left as it was
