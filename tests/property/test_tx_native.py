"""A transaction's two C steps equal their Python references.

``_batchsend.transactional_copy`` (used by ``_transaction._transactional``) gives what
``_transactional_py`` gives: the message itself when flagged, else a ``Message`` equal to
``dataclasses.replace(message, transactional=True)`` holding the very same field objects; None (the
reference runs) for anything it does not take. ``_batchsend.end_binary`` (used by
``_remoting._end_binary``) gives ``_end_binary_py``'s bytes for the same reference, group, decision and
check flag; None for arguments it does not take."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client import _remoting, _single, _transaction
from txmq.client._transport import TransactionRef
from txmq.common import msgid
from txmq.common.message import Message

COPY = _single.TRANSACTIONAL_COPY
END_BINARY = _single.END_BINARY
needs_c = pytest.mark.skipif(COPY is None or END_BINARY is None, reason="the C extension is not built")

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=16)
_ascii = st.text(st.characters(max_codepoint=127), max_size=40)


class _SubMessage(Message):
    __slots__ = ()


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    cls = draw(st.sampled_from([Message, Message, Message, _SubMessage]))
    return cls(
        draw(_text.filter(bool)),
        draw(st.binary(max_size=32)),
        tags=draw(st.one_of(st.none(), _text)),
        keys=tuple(draw(st.lists(_text, max_size=2))),
        properties=draw(st.dictionaries(_text.filter(bool), _text, max_size=2)),
        message_group=draw(st.one_of(st.none(), _text)),
        delivery_timestamp_ms=draw(st.one_of(st.none(), st.integers(0, 2**45))),
        delay_level=draw(st.one_of(st.none(), st.integers(0, 18))),
        message_id=draw(st.one_of(st.none(), _text)),
        transactional=draw(st.booleans()),
        check_immunity_s=draw(st.one_of(st.none(), st.integers(0, 3600))),
    )


def _fields(message: Message) -> list[Any]:
    return [getattr(message, f.name) for f in dataclasses.fields(Message)]


@needs_c
@settings(max_examples=300, deadline=None)
@given(message=_messages())
def test_transactional_copy_is_the_reference(message: Message) -> None:
    made = COPY(message)
    if type(message) is not Message:
        assert made is None  # a subclass: left to the reference (compiled, it refuses one)
        return
    reference = _transaction._transactional_py(message)
    assert made is not None
    if message.transactional:
        assert made is message and reference is message
    else:
        assert made is not message and type(made) is Message
        assert made == reference == dataclasses.replace(message, transactional=True)
        for got, want in zip(_fields(made), _fields(reference), strict=True):
            assert got is want  # the very objects, as the slot maker stores them
    assert _transaction._transactional(message) == reference


@needs_c
def test_transactional_copy_declines_what_it_does_not_take() -> None:
    message = Message("t", b"x")
    # a flag that is not a bool: left to the reference (which keeps a truthy one, copies a falsy one;
    # compiled, it refuses a non-bool)
    for flag in (1, 0, "yes", None):
        assert COPY(dataclasses.replace(message, transactional=flag)) is None  # type: ignore[arg-type]
    empty = object.__new__(Message)  # every slot empty
    assert COPY(empty) is None
    for other in (None, b"", "message", 3, object()):
        assert COPY(other) is None
    with pytest.raises(TypeError):
        COPY()
    with pytest.raises(TypeError):
        COPY(message, message)


_END_PARTS = (_remoting._END_COMMIT, _remoting._END_ROLLBACK, _remoting._END_NOT)
_CHECK_PARTS = (_remoting._END_FROM_CHECK, _remoting._END_NOT_FROM_CHECK)


@needs_c
@settings(max_examples=400, deadline=None)
@given(
    group=st.one_of(_text, _ascii),
    topic=st.one_of(_text, _ascii),
    message_id=st.one_of(_text, _ascii),
    transaction_id=st.one_of(_text, _ascii),
    commit_log_offset=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70)),
    queue_offset=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**70), 2**70)),
    offset_message_id=st.one_of(
        st.none(),
        _text,
        st.builds(
            msgid.offset_message_id, st.just("127.0.0.1"), st.integers(1, 65535), st.integers(0, 2**40)
        ),
    ),
    commit=st.sampled_from([True, False, None]),
    from_check=st.booleans(),
)
def test_end_binary_is_the_reference(
    group: str,
    topic: str,
    message_id: str,
    transaction_id: str,
    commit_log_offset: int,
    queue_offset: int,
    offset_message_id: str | None,
    commit: bool | None,
    from_check: bool,
) -> None:
    ref = TransactionRef(
        topic, message_id, transaction_id, commit_log_offset, queue_offset, offset_message_id, "broker-a"
    )
    reference = _remoting._end_binary_py(ref, group, commit, from_check)
    assert reference == _remoting._end_binary_pairs(ref, group, commit, from_check)
    # the kept pairs are there now: the second call takes the C path where it can
    assert _remoting._end_binary(ref, group, commit, from_check) == reference
    made = END_BINARY(
        _remoting.binary_pair("producerGroup", group),
        queue_offset,
        _remoting._half_log_offset(ref),
        _END_PARTS[2] if commit is None else _END_PARTS[0] if commit else _END_PARTS[1],
        message_id,
        _remoting.binary_pair("topic", topic),
        _remoting._END_FROM_CHECK if from_check else _remoting._END_NOT_FROM_CHECK,
        transaction_id,
    )
    plain = (
        message_id.isascii()
        and transaction_id.isascii()
        and all(-(2**63) <= n < 2**63 for n in (queue_offset, _remoting._half_log_offset(ref)))
    )
    if plain:
        assert made == reference
    else:
        assert made is None


@needs_c
def test_end_binary_declines_what_it_does_not_take() -> None:
    group = _remoting.binary_pair("producerGroup", "g")
    topic = _remoting.binary_pair("topic", "t")
    ok: list[Any] = [group, 1, 2, _END_PARTS[0], "id", topic, _CHECK_PARTS[0], "tx"]
    assert END_BINARY(*ok) is not None
    for index, bad in [
        (0, "g"), (0, bytearray(group)), (1, True), (1, 1.0), (1, "1"), (2, None), (2, 2**63),
        (3, "x"), (4, b"id"), (4, "é"), (5, memoryview(topic)), (6, None), (7, 7), (7, "中"),
    ]:  # fmt: skip
        args = list(ok)
        args[index] = bad
        assert END_BINARY(*args) is None, (index, bad)
    with pytest.raises(TypeError):
        END_BINARY(*ok[:7])


def test_end_binary_refuses_what_the_reference_refuses() -> None:
    """A reference whose texts are not str: TypeError from both forms (the channel then takes the
    generic header), even once its group's and topic's pairs are kept."""
    good = TransactionRef("t", "id", "tx", 5, 6, None, "broker-a")
    _remoting._end_binary(good, "g", True, False)  # keeps the pairs of "g" and "t"
    for ref in (
        TransactionRef("t", b"id", "tx", 5, 6, None, "broker-a"),  # type: ignore[arg-type]
        TransactionRef("t", "id", None, 5, 6, None, "broker-a"),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError):
            _remoting._end_binary_py(ref, "g", True, False)
        with pytest.raises(TypeError):
            _remoting._end_binary(ref, "g", True, False)
