"""A plain message's SEND_MESSAGE_V2 binary header made in one C call (``_batchsend.plain_single``, used
by ``_single.BinarySendHeaders.request``) is the reference's (``request_py``, itself held to the generic
encoder by tests/unit/test_send_header_template.py): for any message, the header equals the one the
generic ``headers.send_v2_fields`` + ``frame.binary_ext`` render for the same born time and id, the id
is the next of ``msgid.SEQUENCE`` in ``msgid.new_message_id``'s shape, and a message the C call declines
takes nothing from the sequence."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client import _remoting_convert as conv
from txmq.client import _single
from txmq.common import limits, msgid, names
from txmq.common import properties as props
from txmq.common.message import EMPTY_PROPERTIES, Message, MessageQueue
from txmq.protocol.remoting import frame, headers

PLAIN_SINGLE = _single._PLAIN_SINGLE
needs_c = pytest.mark.skipif(PLAIN_SINGLE is None, reason="the C extension is not built (pure Python)")

_name = st.text('abcXYZ09_-%"\\é中', min_size=1, max_size=12)
_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12)


def _generic_ext(mq: MessageQueue, group: str, queue_id: int, message: Message, born: int, mid: str) -> bytes:
    ext = headers.send_v2_fields(
        group or "DEFAULT_PRODUCER", mq.topic, names.DEFAULT_TOPIC, limits.queues_per_topic_default,
        queue_id, conv.sys_flag_of(message), born,
        props.encode(conv.message_properties(message, mid, group)).decode("utf-8"), False, mq.broker_name,
    )  # fmt: skip
    return frame.binary_ext(ext)


def _next_number() -> int:
    """The number the next id takes, read without taking it (a copy of the count)."""
    text = repr(msgid.SEQUENCE)  # "count(N)"
    assert text.startswith("count(") and text.endswith(")")
    return int(text[6:-1])


@settings(max_examples=300, deadline=None)
@given(
    group=st.one_of(st.just(""), _name),
    topic=_name,
    broker=_name,
    queue_id=st.integers(-1, 1023),
    tags=st.one_of(st.none(), st.just(""), _name),
    keys=st.lists(_name, max_size=2),
    user=st.one_of(st.just({}), st.dictionaries(_name, _text, max_size=2)),
    delay=st.one_of(st.none(), st.just(0), st.integers(1, 3)),
    message_id=st.one_of(st.none(), st.just(""), st.just("01ABCDEF")),
    transactional=st.booleans(),
    body=st.binary(max_size=64),
)
def test_request_is_the_references_header(
    group: str,
    topic: str,
    broker: str,
    queue_id: int,
    tags: str | None,
    keys: list[str],
    user: dict[str, str],
    delay: int | None,
    message_id: str | None,
    transactional: bool,
    body: bytes,
) -> None:
    mq = MessageQueue(topic, max(queue_id, 0), broker)
    message = Message(
        topic, body, tags=tags, keys=tuple(keys), properties=user, delay_level=delay, message_id=message_id,
        transactional=transactional,
    )  # fmt: skip
    sender = _single.BinarySendHeaders()
    for request in (sender.request, sender.request, sender.request_py):  # the second from the cached parts
        before = _next_number()
        ext, sent_body, mid = request(mq, message, group, queue_id)
        assert sent_body == body and type(sent_body) is bytes
        if message_id:
            assert mid == message_id and _next_number() == before
        else:
            assert _next_number() == (before + 1) and len(mid) == 34
            assert mid[-8:] == "%08X" % (before & 0xFFFFFFFF)
            assert mid[:26] == msgid.id_prefix(int(frame._binary_map_py(ext, 0)["g"]))
        born = int(frame._binary_map_py(ext, 0)["g"])
        assert ext == _generic_ext(mq, group, queue_id, message, born, mid)


def _plain_args(message: Any, **changes: Any) -> list[Any]:
    args: dict[str, Any] = {
        "message": message, "transactional": True, "head": b"H", "now": 1_700_000_000_123, "before": b"B",
        "prefix": msgid.id_prefix(1_700_000_000_123), "sequence": msgid.SEQUENCE, "after": b"A",
        "empty": EMPTY_PROPERTIES,
    }  # fmt: skip
    args.update(changes)
    return list(args.values())


@needs_c
def test_plain_single_lays_the_parts_around_the_born_time_and_id() -> None:
    message = Message("t", b"body", transactional=True)
    before = _next_number()
    ext, body, mid = PLAIN_SINGLE(*_plain_args(message))
    assert body is message.body
    assert mid == msgid.id_prefix(1_700_000_000_123) + "%08X" % (before & 0xFFFFFFFF)
    assert ext == b"H" + b"1700000000123" + b"B" + mid.encode() + b"A"


@needs_c
@pytest.mark.parametrize(
    ("message", "changes"),
    [
        (Message("t", b"x", transactional=True), {"transactional": False}),
        (Message("t", b"x"), {}),  # its flag False, True asked
        (Message("t", b"x", transactional=True), {"now": 999_999_999_999}),
        (Message("t", b"x", transactional=True), {"now": 10_000_000_000_000}),
        (Message("t", b"x", transactional=True), {"now": 2**70}),
        (Message("t", b"x", transactional=True), {"prefix": "01"}),
        (Message("t", b"x", transactional=True), {"sequence": iter(range(5))}),
        (Message("t", b"x", transactional=True), {"head": "H"}),
        (Message("t", b"x", transactional=True), {"transactional": 1}),
        (Message("t", b"x", transactional=True, tags="a"), {}),
        (Message("t", b"x", transactional=True, tags=""), {}),
        (Message("t", b"x", transactional=True, keys=("k",)), {}),
        (Message("t", b"x", transactional=True, properties={"a": "b"}), {}),
        (Message("t", b"x", transactional=True, message_group="g"), {}),
        (Message("t", b"x", transactional=True, delay_level=0), {}),
        (Message("t", b"x", transactional=True, delivery_timestamp_ms=5), {}),
        (Message("t", b"x", transactional=True, check_immunity_s=5), {}),
        (Message("t", b"x", transactional=True, message_id="01AB"), {}),
        ("not a message", {}),
    ],
)
def test_what_is_not_plain_is_declined_and_takes_no_number(message: Any, changes: dict[str, Any]) -> None:
    before = _next_number()
    assert PLAIN_SINGLE(*_plain_args(message, **changes)) is None
    assert _next_number() == before
    with pytest.raises(TypeError):
        PLAIN_SINGLE(message)
