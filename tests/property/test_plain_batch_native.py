"""A plain batch's ids and SEND_BATCH_MESSAGE body in one C pass (``client/_batchsend.c``
``plain_batch``) against the reference: ``msgid``'s ids (the shared 26-character prefix and the
sequence's number as 8 hex digits) and ``_remoting_convert.batch_body_general`` of them, byte for
byte; for any batch it declines, None with no number taken from the sequence. The C tests are
skipped when the extension is not built (``TXMQ_PURE=1``); the last test (``_send_request``'s body
and ids) runs either way."""

from __future__ import annotations

import importlib
import itertools
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.client import _remoting_convert as conv
from txmq.client import _single as single
from txmq.client._remoting import RemotingTransport
from txmq.common import msgid
from txmq.common.message import EMPTY_PROPERTIES, Message, MessageQueue
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.message_codec import decode_batch

try:
    _batchsend = importlib.import_module("txmq.client._batchsend")
except ImportError:
    _batchsend = None

needs_c = pytest.mark.skipif(_batchsend is None, reason="the _batchsend C extension is not built")

_ID = re.compile(r"01[0-9A-F]{32}")


class _SubMessage(Message):
    __slots__ = ()


def _message(kind: str, body: bytes) -> Any:
    make: dict[str, Any] = {
        "plain": lambda: Message("orders", body),
        "other topic": lambda: Message("other", body),
        "empty dict": lambda: Message("orders", body, properties={}),
        "bytearray": lambda: Message("orders", bytearray(body)),  # stored as bytes: plain
        "tags": lambda: Message("orders", body, tags="t"),
        "empty tags": lambda: Message("orders", body, tags=""),
        "keys": lambda: Message("orders", body, keys=("k",)),
        "group": lambda: Message("orders", body, message_group="g"),
        "delivery": lambda: Message("orders", body, delivery_timestamp_ms=5),
        "delay": lambda: Message("orders", body, delay_level=1),
        "delay 0": lambda: Message("orders", body, delay_level=0),
        "transactional": lambda: Message("orders", body, transactional=True),
        "immunity": lambda: Message("orders", body, check_immunity_s=5),
        "properties": lambda: Message("orders", body, properties={"a": "b"}),
        "id": lambda: Message("orders", body, message_id="ID"),
        "empty id": lambda: Message("orders", body, message_id=""),
        "subclass": lambda: _SubMessage("orders", body),
        "not a message": lambda: (body,),
    }
    return make[kind]()


_PLAIN = {"plain", "other topic", "empty dict", "bytearray"}
_KINDS = st.sampled_from(
    ["plain"] * 8
    + [
        "other topic", "empty dict", "bytearray", "tags", "empty tags", "keys", "group", "delivery", "delay",
        "delay 0", "transactional", "immunity", "properties", "id", "empty id", "subclass", "not a message",
    ]
)  # fmt: skip
_GROUPS = st.sampled_from(["", "bench-p0", "grüppe", "g" * 300])
_BODIES = st.one_of(st.binary(max_size=40), st.just(b"x" * 1024))


def _expected(messages: list[Any], prefix: str, start: int, group: str) -> tuple[bytes, list[str]]:
    ids = [prefix + "%08X" % ((start + i) & 0xFFFFFFFF) for i in range(len(messages))]
    return conv.batch_body_general(messages, ids, group), ids


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    rows=st.lists(st.tuples(_KINDS, _BODIES), max_size=8),
    as_tuple=st.booleans(),
    group=_GROUPS,
    start=st.one_of(st.integers(0, 2**24), st.integers(2**32 - 4, 2**32 + 4), st.integers(0, 2**70)),
    now_ms=st.integers(0, 2**43),
)
@example(rows=[("plain", b"a"), ("plain", b"b")], as_tuple=False, group="bench-p0", start=2**32 - 1, now_ms=0)
def test_plain_batch_is_the_reference(
    rows: list[tuple[str, bytes]], as_tuple: bool, group: str, start: int, now_ms: int
) -> None:
    messages = [_message(kind, body) for kind, body in rows]
    batch: Any = tuple(messages) if as_tuple else messages
    prefix = msgid.id_prefix(now_ms)
    tail = conv.plain_id_tail(group)
    assert tail is not None
    sequence = itertools.count(start)
    got = _batchsend.plain_batch(batch, prefix, sequence, tail, conv.PLAIN_PROPERTIES_MAX, EMPTY_PROPERTIES)
    if messages and {kind for kind, _ in rows} <= _PLAIN:
        assert got == _expected(messages, prefix, start, group)
        body, ids = got
        assert type(body) is bytes
        assert all(type(i) is str and _ID.fullmatch(i) for i in ids)
        assert len(set(ids)) == len(ids)
        assert [m.body for m in decode_batch(body)] == [m.body for m in messages]
        assert next(sequence) == start + len(messages)
    else:
        assert got is None
        assert next(sequence) == start  # nothing taken


@needs_c
def test_plain_batch_declines_what_it_does_not_know() -> None:
    messages = [Message("orders", b"a"), Message("orders", b"bc")]
    prefix, tail, most = msgid.id_prefix(0), b"\x02", conv.PLAIN_PROPERTIES_MAX

    def made(*args: Any) -> Any:
        return _batchsend.plain_batch(*args)

    assert made(messages, prefix, itertools.count(7), tail, most, EMPTY_PROPERTIES) is not None
    assert made(iter(messages), prefix, itertools.count(7), tail, most, EMPTY_PROPERTIES) is None
    assert made(messages, prefix, iter(range(9)), tail, most, EMPTY_PROPERTIES) is None
    assert made(messages, prefix[:-1], itertools.count(7), tail, most, EMPTY_PROPERTIES) is None
    assert made(messages, prefix[:-1] + "é", itertools.count(7), tail, most, EMPTY_PROPERTIES) is None
    assert made(messages, prefix, itertools.count(7), "\x02", most, EMPTY_PROPERTIES) is None
    assert made(messages, prefix, itertools.count(7), tail, 40, EMPTY_PROPERTIES) is None  # too long
    assert made(messages, prefix, itertools.count(7), tail, most, {}) is None  # not Message's default
    assert made([], prefix, itertools.count(7), tail, most, EMPTY_PROPERTIES) is None
    with pytest.raises(TypeError):
        made(messages, prefix, itertools.count(7), tail, most)


@needs_c
def test_the_sdk_uses_the_c_pass() -> None:
    assert single._PLAIN_BATCH is _batchsend.plain_batch
    assert single.plain_batch([Message("orders", b"a")] * 2, "a\x01b", 0) is None  # the group's way


def test_msgid_prefix_is_new_message_ids() -> None:
    now = 1_700_000_000_123
    for made in [*msgid.new_message_ids(now, 3), msgid.new_message_id(now)]:
        assert made[:26] == msgid.id_prefix(now)
        assert _ID.fullmatch(made)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(_KINDS, _BODIES), min_size=2, max_size=6), group=_GROUPS)
def test_send_request_body_is_the_reference(rows: list[tuple[str, bytes]], group: str) -> None:
    """``_send_request`` of a batch (the C pass when built, else the loop): the reference body of its
    ids, given ids kept, fresh ids unique and of RocketMQ's client id format."""
    messages = [_message(kind, body) for kind, body in rows if kind not in {"not a message"}]
    if len(messages) < 2:
        return
    transport = RemotingTransport("127.0.0.1:9876")
    mq = MessageQueue("orders", 0, "broker-a")
    try:
        code, _ext, body, ids = transport._send_request(mq, messages, group, 0)
    except Exception as exc:  # the reference's error, the same with or without the C pass
        with pytest.raises(type(exc)):
            conv.batch_body_general(messages, [m.message_id or "01" + "0" * 32 for m in messages], group)
        return
    assert code == RequestCode.SEND_BATCH_MESSAGE
    assert body == conv.batch_body_general(messages, ids, group)
    for message, made in zip(messages, ids, strict=True):
        if message.message_id:
            assert made == message.message_id
        else:
            assert _ID.fullmatch(made)
    fresh = [made for message, made in zip(messages, ids, strict=True) if not message.message_id]
    assert len(set(fresh)) == len(fresh)


@needs_c
def test_the_group_tail_is_kept_per_group_and_stays_the_references() -> None:
    """``_single.plain_batch`` keeps ``plain_id_tail`` per group (at most ``_ID_TAILS_MAX``): a batch
    sent again with the group kept, or past the cap, is still the reference body; a group without a
    plain tail is never kept and still declines."""
    messages = [Message("orders", b"a"), Message("orders", b"bc")]
    groups = ["", "kept", "é-group"] + [f"g{n}" for n in range(single._ID_TAILS_MAX + 3)]
    for _ in range(2):
        for group in groups:
            made = single.plain_batch(messages, group, 0)
            assert made is not None
            body, ids = made
            assert body == conv.batch_body_general(messages, ids, group)
            assert single.plain_batch(messages, "a\x01b", 0) is None
    assert len(single._ID_TAILS) <= single._ID_TAILS_MAX
    assert "a\x01b" not in single._ID_TAILS
    assert all(single._ID_TAILS[group] == conv.plain_id_tail(group) for group in single._ID_TAILS)
