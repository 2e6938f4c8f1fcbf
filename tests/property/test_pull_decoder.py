"""The consumer's lean pull decode (``pulled_views``) against the general one (``view_of`` over
``decode_messages``): equal views for arbitrary records and tag filters, the same error for any
truncated or damaged body."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client import _remoting_convert as conv
from txmq.common import properties as props
from txmq.common.errors import TxmqError
from txmq.common.message import MessageView
from txmq.protocol.remoting.message_codec import WireMessage, decode_messages, encode_messages

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=10)
_KEYS = st.one_of(
    st.sampled_from([
        props.TAGS, props.KEYS, props.UNIQ_KEY, props.RECONSUME_TIME, props.RETRY_TOPIC,
        props.TIMER_DELIVER_MS, props.SHARDING_KEY, props.TRAN_MSG, props.DELAY, props.MESSAGE_TYPE,
        props.TRANSACTION_ID,
    ]),
    st.text("abcXY_", min_size=1, max_size=8),
)  # fmt: skip
_VALUES = st.one_of(
    _TEXT, st.integers(0, 10**15).map(str), st.sampled_from(["a", "b", "true", "FIFO", "k1 k2"])
)
_HOSTS = st.tuples(
    st.builds(lambda a, b: f"10.0.{a}.{b}", st.integers(0, 255), st.integers(0, 255)), st.integers(0, 65535)
)
wire_st = st.builds(
    WireMessage,
    topic=st.one_of(st.text("abT%_", min_size=1, max_size=20), st.just("L" * 150)),
    body=st.binary(max_size=64),
    properties=st.dictionaries(_KEYS, _VALUES, max_size=6),
    queue_id=I32,
    queue_offset=I64,
    commit_log_offset=I64,
    born_timestamp=I64,
    born_host=_HOSTS,
    store_timestamp=I64,
    store_host=_HOSTS,
    reconsume_times=I32,
)
_TAGS = st.one_of(st.none(), st.frozensets(st.sampled_from(["a", "b", "c"]), min_size=1))


def _general(body: bytes, tags: frozenset[str] | None) -> list[MessageView] | str:
    try:
        return [v for v in (conv.view_of(w) for w in decode_messages(body)) if conv.matches(tags, v)]
    except TxmqError as exc:
        return f"{type(exc).__name__}: {exc}"


def _lean(body: bytes, tags: frozenset[str] | None) -> list[MessageView] | str:
    try:
        return conv.pulled_views(body, tags)
    except TxmqError as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=300)
@given(st.lists(wire_st, max_size=4), _TAGS)
def test_lean_decode_gives_the_same_views(messages: list[WireMessage], tags: frozenset[str] | None) -> None:
    body = encode_messages(messages)
    lean = _lean(body, tags)
    assert lean == _general(body, tags)
    assert not isinstance(lean, str)
    for got, expected in zip(lean, _general(body, tags), strict=True):
        assert (got.born_host, got.store_host, got.store_size) == (
            expected.born_host, expected.store_host, expected.store_size,
        )  # fmt: skip


@settings(max_examples=300)
@given(st.lists(wire_st, min_size=1, max_size=3), st.data())
def test_damaged_bodies_fail_alike(messages: list[WireMessage], data: st.DataObject) -> None:
    body = bytearray(encode_messages(messages))
    if data.draw(st.booleans()):
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    assert _lean(bytes(body), None) == _general(bytes(body), None)


def test_ipv6_hosts_take_the_general_decoder() -> None:
    body = bytearray(encode_messages([WireMessage("T", b"x", {props.TAGS: "a"})]))
    expected = _general(bytes(body), None)
    assert conv.pulled_views(bytes(body), None) == expected
    body[31] |= 0x10  # sysFlag: 16-byte born host; the general decoder reads it so (or fails)
    assert _lean(bytes(body), None) == _general(bytes(body), None)
