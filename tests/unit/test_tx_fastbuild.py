"""The objects a transaction builds with ``object.__new__`` and slot setters (``_transaction``'s
``half_view_at``, ``ref_of``, ``_transactional``; compiled with mypyc) are the objects the class calls
they replace build (the reference): same type, every field (``raw_properties`` too, which ``==`` skips)
the same value of the same type, equal and of equal hash."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client import _transaction as tx
from txmq.client._transport import TransactionRef
from txmq.common import msgid
from txmq.common.message import Message, MessageQueue, MessageType, MessageView, SendResult

_name = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=20)
_opt = st.none() | _name
_offset_ids = st.one_of(
    st.none(),
    st.just(""),
    _name,
    st.builds(
        msgid.offset_message_id,
        st.sampled_from(["127.0.0.1", "10.1.2.3"]),
        st.integers(1, 65535),
        st.integers(0, 2**62),
    ),
)
_messages = st.builds(
    Message,
    topic=_name,
    body=st.binary(max_size=64) | st.binary(max_size=8).map(bytearray),
    tags=_opt,
    keys=st.lists(_name, max_size=3).map(tuple),
    properties=st.dictionaries(_name, _name, max_size=3),
    message_group=_opt,
    delivery_timestamp_ms=st.none() | st.integers(0, 2**45),
    delay_level=st.none() | st.integers(0, 18),
    message_id=_opt,
    transactional=st.booleans(),
    check_immunity_s=st.none() | st.integers(0, 10**6),
)
_halves = st.builds(
    SendResult,
    message_id=_name,
    queue=st.builds(MessageQueue, _name, st.integers(0, 1023), _name),
    queue_offset=st.integers(-1, 2**62),
    transaction_id=_opt,
    offset_message_id=_offset_ids,
)


def _same(fast: object, reference: object) -> None:
    assert type(fast) is type(reference)
    for f in dataclasses.fields(reference):  # type: ignore[arg-type]
        got, want = getattr(fast, f.name), getattr(reference, f.name)
        assert type(got) is type(want) and got == want, f.name
    assert fast == reference
    assert hash(fast) == hash(reference) if _hashable(reference) else True


def _hashable(obj: object) -> bool:
    try:
        hash(obj)
    except TypeError:  # a dict of properties
        return False
    return True


def _view_reference(message: Message, half: SendResult, now: int) -> MessageView:
    """The class call ``half_view`` made before (and the meaning of every field it sets)."""
    parsed = msgid.parse_offset_message_id(half.offset_message_id or "")
    return MessageView(
        topic=message.topic, body=bytes(message.body), message_id=half.message_id,
        queue_id=half.queue.queue_id, queue_offset=half.queue_offset,
        commit_log_offset=parsed[2] if parsed else -1, born_timestamp_ms=now, store_timestamp_ms=now,
        tags=message.tags, keys=message.keys, properties=message.properties,
        message_type=MessageType.TRANSACTION, transaction_id=half.transaction_id,
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_messages, _halves, st.integers(0, 2**45))
def test_half_view_and_ref_are_the_class_calls(message: Message, half: SendResult, now: int) -> None:
    view = tx.half_view_at(message, half, now)
    _same(view, _view_reference(message, half, now))
    reference_ref = TransactionRef(
        topic=view.topic, message_id=half.message_id, transaction_id=half.transaction_id or "",
        commit_log_offset=view.commit_log_offset, queue_offset=half.queue_offset,
        offset_message_id=half.offset_message_id, broker_name=half.queue.broker_name,
    )  # fmt: skip
    _same(tx.ref_of(view, half), reference_ref)


@settings(max_examples=300, deadline=None)
@given(_messages)
def test_transactional_is_replace(message: Message) -> None:
    made = tx._transactional(message)
    if message.transactional:
        assert made is message
    else:
        _same(made, dataclasses.replace(message, transactional=True))


def test_half_view_is_born_now() -> None:
    half = SendResult("ID", MessageQueue("t", 1, "b"), 5, "TX", None)
    view = tx.half_view(Message("t", b"x"), half)
    assert view.born_timestamp_ms == view.store_timestamp_ms > 1_600_000_000_000
    assert view.commit_log_offset == -1 and view.transaction_id == "TX"
