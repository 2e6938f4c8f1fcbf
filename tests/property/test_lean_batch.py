"""The broker's lean batch decode agrees with the general one on every SEND_BATCH_MESSAGE body.

``convert.lean_batch`` reads a batch without a dict of properties per entry; the reference is
``decode_batch_entries`` then ``to_lean`` per entry. On every body (well-formed or not, with awkward
property bytes) the lean decode gives the reference's messages exactly when the reference gives
lane messages for every entry, and None otherwise (a malformed body, an empty one, a delayed or
transactional entry), so the general path then decides.
"""

from __future__ import annotations

import struct

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from txmq.common import properties as props
from txmq.common.message import LeanMessage
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.protocol.remoting.errors import InvalidBody
from txmq.protocol.remoting.message_codec import BatchMessage, decode_batch_entries, encode_batch
from txmq.server.remoting.convert import lean_batch, to_lean

_NAMES = st.sampled_from(
    [
        props.TAGS, props.KEYS, props.UNIQ_KEY, props.SHARDING_KEY, props.PRODUCER_GROUP,
        props.WAIT_STORE_MSG_OK, props.MESSAGE_TYPE, props.DELAY, props.TRAN_MSG, props.TIMER_DELIVER_MS,
        props.CHECK_IMMUNITY_TIME_IN_SECONDS, "__SHARDING_KEY", "RECONSUME_TIME", "a", "b", "user.x", "",
        "TAGSX", "XKEYS", "é",
    ]
)  # fmt: skip
_VALUES = st.sampled_from(["", "t", "tag-1", " ", "k1 k2", "  k1  k2 ", "ID-1", "é", "g1", "true", "3"])
_VALUES |= st.text(alphabet=st.sampled_from("ab \x01\x02é|"), max_size=6)


@st.composite
def property_bytes(draw: st.DrawFn) -> bytes:
    """An entry's properties: pairs of (often system) names, oddly joined at times, or raw bytes."""
    kind = draw(st.sampled_from(["pairs", "pairs", "pairs", "odd", "raw"]))
    pairs = draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=5))
    if kind == "raw":
        return draw(st.binary(max_size=24))
    text = "".join(f"{name}\x01{value}\x02" for name, value in pairs)
    if kind == "odd":
        choice = draw(st.sampled_from(["no-last-sep", "double-sep", "lead-sep", "bare-name", "bad-utf8"]))
        if choice == "no-last-sep":
            text = text[:-1]
        elif choice == "double-sep":
            text = text.replace("\x02", "\x02\x02", 1)
        elif choice == "lead-sep":
            text = "\x02" + text
        elif choice == "bare-name":
            text += "NAME\x02"
        else:
            return text.encode() + b"\xff\x02"
    return text.encode()


_BODIES = st.sampled_from([b"", b"x", b"body" * 64, b"\x00\x01\x02"])


def _entry(body: bytes, properties: bytes, flag: int) -> bytes:
    total = 20 + len(body) + 2 + len(properties)
    head = struct.pack(">iiiii", total, 0, 0, flag, len(body))
    return head + body + struct.pack(">H", len(properties)) + properties


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    """A SEND_BATCH_MESSAGE body, usually well-formed, sometimes cut or with a head field off."""
    entries = draw(st.lists(st.tuples(_BODIES, property_bytes(), st.integers(-1, 3)), max_size=4))
    data = b"".join(_entry(*entry) for entry in entries)
    damage = draw(st.sampled_from(["none", "none", "none", "cut", "total", "body-len", "props-len", "tail"]))
    if damage == "cut" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage in ("total", "body-len", "props-len") and data:
        at = {"total": 0, "body-len": 16}.get(damage)
        if at is None:  # the first entry's properties length
            (body_len,) = struct.unpack_from(">i", data, 16)
            at = 20 + body_len
            data = data[:at] + struct.pack(">H", draw(st.integers(0, 0xFFFF))) + data[at + 2 :]
        else:
            data = data[:at] + struct.pack(">i", draw(st.integers(-3, len(data) + 3))) + data[at + 4 :]
    elif damage == "tail":
        data += draw(st.binary(min_size=1, max_size=21))
    return data


def _reference(data: bytes, sys_flag: int) -> list[LeanMessage] | None:
    """What the general decode gives the lane: every entry's ``to_lean``, or None."""
    try:
        entries = decode_batch_entries(data)
    except InvalidBody:
        return None
    if not entries:
        return None
    lane = [to_lean(body, properties, sys_flag) for body, properties, _ in entries]
    if any(lean is None for lean in lane):
        return None
    return [lean for lean in lane if lean is not None]


@settings(max_examples=1500, deadline=None)
@given(data=batch_bodies(), sys_flag=st.sampled_from([0, 0, 0, TRANSACTION_PREPARED_TYPE, 0x1]))
@example(data=_entry(b"x", b"TAGS\x01t\x02TAGS\x01u\x02a\x011\x02b\x012\x02a\x013\x02", 0), sys_flag=0)
@example(data=_entry(b"x", b"a\x01b\x01c\x02\x02\x02", 0), sys_flag=0)
@example(data=_entry(b"x", b"", 0) + _entry(b"y", b"DELAY\x01\x02", 0), sys_flag=0)
def test_lean_batch_agrees_with_the_general_decode(data: bytes, sys_flag: int) -> None:
    expected = _reference(data, sys_flag)
    got = lean_batch(data, sys_flag)
    event("lane" if expected is not None else "general")
    assert got == expected
    if got is not None:  # types as the lane reads them (a bytes body, a dict of user properties)
        assert all(type(m.body) is bytes and type(m.properties) is dict for m in got)


_CLIENT_NAMES = st.sampled_from(
    ["a", "user.x", props.TAGS, props.KEYS, props.UNIQ_KEY, props.SHARDING_KEY, props.PRODUCER_GROUP, "WAIT"]
)
_CLIENT_PROPERTIES = st.dictionaries(
    _CLIENT_NAMES, st.sampled_from(["v", "k1 k2", "ID-1", "é", "true"]), max_size=4
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"x", b"body" * 64]), _CLIENT_PROPERTIES), min_size=1, max_size=5))
def test_what_clients_send_takes_the_lean_decode(entries: list[tuple[bytes, dict[str, str]]]) -> None:
    """Bodies as the SDK and 4.x clients encode them (no delay, no transaction) never fall back."""
    data = encode_batch([BatchMessage(body, properties) for body, properties in entries])
    got = lean_batch(data, 0)
    assert got is not None
    assert got == _reference(data, 0)
