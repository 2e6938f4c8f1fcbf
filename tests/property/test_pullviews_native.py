"""The C pull decode (``client/_pullviews.c``: a pull body straight into ``MessageView`` objects) against
its reference, ``_remoting_convert.pulled_views_py``: for every body it answers, the same views field by
field (same values, same types, property dicts with the same pairs in the same order, ``raw_properties``
None); for anything the reference treats otherwise (it raises, or goes the general way) it answers None.
Skipped when the extension is not built (no compiler, ``TXMQ_PURE=1``)."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.client import _remoting_convert as conv
from txmq.common import properties as props
from txmq.common.errors import TxmqError
from txmq.common.message import MessageView
from txmq.protocol.remoting.message_codec import WireMessage, encode_messages

try:
    _pullviews = importlib.import_module("txmq.client._pullviews")
except ImportError:
    _pullviews = None

pytestmark = pytest.mark.skipif(_pullviews is None, reason="the _pullviews C extension is not built")

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
_SPECIAL = [
    props.TAGS, props.KEYS, props.UNIQ_KEY, props.RECONSUME_TIME, props.RETRY_TOPIC, props.TIMER_DELIVER_MS,
    props.SHARDING_KEY, props.TRAN_MSG, props.DELAY, props.MESSAGE_TYPE, props.TRANSACTION_ID,
    props.PRODUCER_GROUP, props.WAIT_STORE_MSG_OK, props.MIN_OFFSET, props.MAX_OFFSET,
]  # fmt: skip
_ASCII = st.text(
    st.characters(min_codepoint=0, max_codepoint=127, blacklist_characters="\x01\x02"), max_size=10
)
_ANY = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=10)
_VALUES_ASCII = st.one_of(
    _ASCII, st.integers(0, 10**15).map(str), st.integers(0, 10**30).map(str),
    st.sampled_from(["", "a", "b", "true", "FIFO", "NORMAL", "DELAY", "TRANSACTION", "k1 k2", " k1  k "]),
)  # fmt: skip
_KEYS_ASCII = st.one_of(
    st.sampled_from(_SPECIAL), st.text("abcXY_ ", min_size=1, max_size=8), _ASCII.filter(bool)
)
_HOSTS = st.tuples(
    st.builds(lambda a, b, c, d: f"{a}.{b}.{c}.{d}", *[st.integers(0, 255)] * 4),
    st.integers(-(2**31), 2**31 - 1),
)
_TOPICS = st.one_of(st.text("abT%_", min_size=1, max_size=20), st.just("L" * 150), st.just("Tö"))


def _wire(properties: st.SearchStrategy[dict[str, str]]) -> st.SearchStrategy[WireMessage]:
    return st.builds(
        WireMessage,
        topic=_TOPICS,
        body=st.binary(max_size=64),
        properties=properties,
        queue_id=I32,
        queue_offset=I64,
        commit_log_offset=I64,
        born_timestamp=I64,
        born_host=_HOSTS,
        store_timestamp=I64,
        store_host=_HOSTS,
        reconsume_times=I32,
    )


ascii_wire = _wire(st.dictionaries(_KEYS_ASCII, _VALUES_ASCII, max_size=7))
any_wire = _wire(
    st.dictionaries(st.one_of(_KEYS_ASCII, _ANY.filter(bool)), st.one_of(_VALUES_ASCII, _ANY), max_size=6)
)

FIELDS = [f.name for f in dataclasses.fields(MessageView)]


def _reference(body: bytes) -> list[MessageView] | None:
    try:
        return conv.pulled_views_py(body)
    except TxmqError:
        return None


def _assert_identical(got: list[MessageView], expected: list[MessageView]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert type(a) is MessageView
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert type(x) is type(y), name
            assert x == y, name
        assert list(a.properties.items()) == list(b.properties.items())
        assert a.raw_properties is None
        assert a == b


def _check(body: bytes) -> list[MessageView] | None:
    got = _pullviews.views(body)  # type: ignore[union-attr]
    expected = _reference(body)
    if got is not None:
        assert expected is not None, "the C decode answered a body the reference refuses"
        _assert_identical(got, expected)
    return got


@settings(max_examples=400, derandomize=True)
@given(st.lists(ascii_wire, max_size=5))
def test_ascii_bodies_give_identical_views(messages: list[WireMessage]) -> None:
    body = encode_messages(messages)
    got = _check(body)
    huge = any(
        (m.properties.get(k, "").isdecimal() and len(m.properties[k]) > 4000)
        for m in messages
        for k in (props.RECONSUME_TIME, props.TIMER_DELIVER_MS)
    )
    if not huge and all(m.topic.isascii() for m in messages):
        assert got is not None  # the common case is the C path's, not a vacuous pass


@settings(max_examples=300, derandomize=True)
@given(st.lists(any_wire, max_size=4))
def test_any_bodies_are_identical_or_declined(messages: list[WireMessage]) -> None:
    _check(encode_messages(messages))


def _spliced(raw: bytes, wire: WireMessage) -> bytes:
    """A one-record body whose properties are exactly ``raw`` (duplicates, empty entries, entries
    without a separator: what no dict encodes): a placeholder property of the same length, replaced."""
    filler = "x" * (len(raw) - 3)
    body = encode_messages([dataclasses.replace(wire, properties={"Z": filler})])
    placeholder = b"Z\x01" + filler.encode() + b"\x02"
    at = body.index(placeholder)
    return body[:at] + raw + body[at + len(placeholder) :]


_RAW_ITEM = st.one_of(
    st.tuples(_KEYS_ASCII, _VALUES_ASCII).map(lambda kv: f"{kv[0]}\x01{kv[1]}"),
    st.sampled_from(["", "noseparator", "A\x01b\x01c", "\x01v", "UNIQ_KEY\x01", "KEYS\x01 a  b "]),
)


@settings(max_examples=300, derandomize=True)
@example(raw=["UNIQ_KEY\x01a", "TAGS\x01t", "UNIQ_KEY\x01b", "TAGS\x01"])
@given(raw=st.lists(_RAW_ITEM, max_size=6))
def test_raw_property_text_is_read_as_the_reference_reads_it(raw: list[str]) -> None:
    text = "\x02".join(raw).encode()
    if len(text) < 3:
        text = text + b"\x02\x02\x02"[: 3 - len(text)]
    wire = WireMessage("T", b"body", {}, store_host=("10.1.2.3", 10911), born_host=("127.0.0.1", 5))
    body = _spliced(text, wire)
    got = _check(body)
    parts = [p for p in text.decode().split("\x02") if p]
    if all("\x01" in p for p in parts):
        assert got is not None


@settings(max_examples=300, derandomize=True)
@given(st.lists(ascii_wire, min_size=1, max_size=3), st.data())
def test_damaged_bodies_are_refused_or_identical(messages: list[WireMessage], data: st.DataObject) -> None:
    body = bytearray(encode_messages(messages))
    if data.draw(st.booleans()):
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    _check(bytes(body))


def test_a_message_without_uniq_key_gets_the_offset_message_id() -> None:
    wire = WireMessage("T", b"x", {props.TAGS: "a"}, commit_log_offset=1234, store_host=("10.0.0.9", 10911))
    (view,) = _check(encode_messages([wire])) or []
    assert view.message_id == "0A00000900002A9F00000000000004D2"


def test_ipv6_hosts_and_non_bytes_are_declined() -> None:
    body = bytearray(encode_messages([WireMessage("T", b"x", {props.TAGS: "a"})]))
    assert _pullviews.views(bytes(body)) is not None  # type: ignore[union-attr]
    assert _pullviews.views(bytearray(body)) is None  # type: ignore[union-attr]
    body[39] |= 0x10  # sysFlag (bytes 36-39): a 16-byte born host
    assert _pullviews.views(bytes(body)) is None  # type: ignore[union-attr]
    assert _pullviews.views(b"") == []  # type: ignore[union-attr]


def test_pulled_views_takes_the_c_path_when_built() -> None:
    assert conv._PULLVIEWS is not None
