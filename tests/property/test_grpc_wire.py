"""The hand-encoded SendMessage reply against the generated classes: for arbitrary send results,
``wire.send_reply`` is byte for byte what the ``SendMessageResponse`` the door used to fill (a
``SendResultEntry`` per result) serializes to, and it parses back to the same entries."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.common import properties as props
from txmq.common.message import MessageType, MessageView
from txmq.protocol.grpc import convert, pb, wire

S = pb.service
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_OPT_TEXT = st.one_of(st.none(), _TEXT)


@dataclass
class _Result:  # the fields of SendResult the reply reads
    message_id: str
    transaction_id: str | None
    queue_offset: int
    recall_handle: str | None


def _old_reply(results: list[_Result]) -> bytes:
    """How ``SendMessage`` filled its reply before ``wire.send_reply``."""
    reply = S.SendMessageResponse()
    reply.status.CopyFrom(convert.OK_STATUS)
    add, ok = reply.entries.add, convert.OK_STATUS
    for result in results:
        add(
            status=ok,
            message_id=result.message_id,
            transaction_id=result.transaction_id or "",
            offset=result.queue_offset,
            recall_handle=result.recall_handle or "",
        )
    return bytes(reply.SerializeToString(deterministic=True))


results_st = st.lists(st.builds(_Result, _TEXT, _OPT_TEXT, I64, _OPT_TEXT), max_size=20)


@settings(max_examples=300, deadline=None)
@given(results_st)
def test_send_reply_is_the_generated_reply(results: list[_Result]) -> None:
    encoded = wire.send_reply(results)
    assert encoded == _old_reply(results)
    parsed = S.SendMessageResponse.FromString(encoded)
    assert [e.message_id for e in parsed.entries] == [r.message_id for r in results]
    assert [e.offset for e in parsed.entries] == [r.queue_offset for r in results]


@pytest.mark.parametrize("value", [0, 1, 127, 128, 16383, 16384, 2**63 - 1, -1, -(2**63)])
def test_varint_matches_protobuf(value: int) -> None:
    present = pb.SystemProperties(queue_offset=value)  # explicit presence: 0 is written too
    assert b"\x70" + wire.varint(value) == present.SerializeToString()


_IDS = st.lists(st.tuples(_TEXT, I64), max_size=20)


@settings(max_examples=300, deadline=None)
@given(_IDS)
def test_lane_reply_is_the_generated_reply(columns: list[tuple[str, int]]) -> None:
    """A send-lane batch's reply from its columns: what the door filled from its SendResults."""
    ids = [message_id for message_id, _ in columns]
    offsets = [offset for _, offset in columns]
    results = [_Result(message_id, None, offset, None) for message_id, offset in columns]
    assert wire.lane_reply(ids, offsets) == _old_reply(results)


def test_lane_reply_rejects_ragged_columns() -> None:
    with pytest.raises(ValueError):
        wire.lane_reply(["a", "b"], [1])


# ---- ReceiveMessageResponse{message} -------------------------------------------------------------
_OPT_NAME = st.one_of(st.none(), _TEXT)
_MS = st.integers(-(2**40), 2**45)
_PROPS = st.dictionaries(
    st.one_of(
        _TEXT, st.sampled_from([props.DLQ_ORIGIN_TOPIC, props.DLQ_ORIGIN_MESSAGE_ID, props.TAGS, props.KEYS])
    ),
    _TEXT,
    max_size=5,
)
views_st = st.builds(
    MessageView,
    topic=_TEXT,
    body=st.binary(max_size=300),
    message_id=_TEXT,
    queue_id=I32,
    queue_offset=I64,
    commit_log_offset=st.integers(0, 2**40),
    born_timestamp_ms=_MS,
    store_timestamp_ms=_MS,
    tags=_OPT_NAME,
    keys=st.lists(_TEXT, max_size=3).map(tuple),
    properties=_PROPS,
    message_group=_OPT_NAME,
    delivery_timestamp_ms=st.one_of(st.none(), _MS),
    message_type=st.sampled_from(list(MessageType)),
    delivery_attempt=st.integers(-3, 2**31 - 1),
    receipt_handle=_OPT_NAME,
    born_host=_TEXT,
    store_host=_TEXT,
)


@settings(max_examples=500, deadline=None)
@given(views_st, st.one_of(st.none(), st.integers(0, 2**40)))
def test_delivered_is_to_wire_serialized(view: MessageView, invisible_ms: int | None) -> None:
    """The bytes the door streams per delivered message parse to the response ``to_wire`` fills: same
    fields, same presence (a deterministic re-serialization is byte for byte the same)."""
    expected = S.ReceiveMessageResponse()
    convert.to_wire(view, invisible_ms=invisible_ms, into=expected.message)
    parsed = S.ReceiveMessageResponse.FromString(wire.delivered(view, invisible_ms))
    assert parsed == expected
    assert parsed.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    assert parsed.WhichOneof("content") == "message"


def test_delivered_is_byte_identical_for_a_plain_message() -> None:
    """Fields in number order, as upb writes them: for a message without user properties the bytes
    are the generated serialization itself."""
    view = MessageView(
        topic="T", body=b"x" * 1024, message_id="01ABCDEF", queue_id=3, queue_offset=70000,
        commit_log_offset=1, born_timestamp_ms=1_800_000_000_123, store_timestamp_ms=1_800_000_000_456,
        tags="a", keys=("k1", "k2"), receipt_handle="rh", born_host="10.0.0.1:1", store_host="10.0.0.2:2",
    )  # fmt: skip
    expected = S.ReceiveMessageResponse()
    convert.to_wire(view, invisible_ms=30_000, into=expected.message)
    assert wire.delivered(view, 30_000) == expected.SerializeToString()


@settings(max_examples=500, deadline=None)
@given(st.one_of(I64, st.integers(0, 2**64 - 1), st.integers(2**13, 2**36)))
def test_varint_is_the_general_encoding(value: int) -> None:
    """The table-driven varint against the bit-by-bit encoder, every length included."""
    assert wire.varint(value) == wire._encode_varint(value)
    present = pb.SystemProperties(queue_offset=value if value < 2**63 else value - 2**64)
    assert b"\x70" + wire.varint(value) == present.SerializeToString()
