"""``wire.send_lane`` (SendMessageRequest bytes straight into the send lane) against the protobuf decode
the door used before it: ``convert.to_lean(SendMessageRequest.FromString(data).messages)`` plus the first
message's born host. Whenever the lean decoder answers, it answers exactly that; it answers for what
clients send (it must not fall back on the common case); and on anything else (malformed bytes, an
unusual field, a body that does not decompress) it declines, so the door's protobuf path gives its
answer or its error as before."""

from __future__ import annotations

import gzip
import zlib
from typing import Any

from google.protobuf.message import DecodeError
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.common import errors
from txmq.common import properties as props
from txmq.protocol.grpc import convert, pb, wire

S = pb.service
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_KEY = st.one_of(
    _TEXT, st.sampled_from([props.DELAY, props.TAGS, props.KEYS, props.PRODUCER_GROUP, "a", "b"])
)
_BODY = st.binary(max_size=40)
_TS = st.builds(  # times after 1970: a negative one is a ten byte varint, which the lean decoder declines
    lambda s, n: pb.definition.google_dot_protobuf_dot_timestamp__pb2.Timestamp(seconds=s, nanos=n),
    st.integers(0, 2**40),
    st.integers(0, 999_999_999),
)


def _oracle(data: bytes) -> Any:
    """What the door's protobuf path makes of ``data``."""
    try:
        request = S.SendMessageRequest.FromString(data)
    except DecodeError:
        return "malformed"
    if not request.messages:
        return "empty"
    try:
        lane = convert.to_lean(request.messages)
    except errors.TxmqError as exc:
        return type(exc)
    if lane is None:
        return None
    return lane[0], lane[1], request.messages[0].system_properties.born_host


@st.composite
def _messages(draw: st.DrawFn, common: bool) -> Any:
    """A v2 Message; ``common``: only what the send lane takes (as official clients send it)."""
    message = pb.Message(body=draw(_BODY))
    message.topic.name = draw(st.sampled_from(["T", "U", ""])) if not common else "T"
    if draw(st.booleans()):
        message.topic.resource_namespace = draw(_TEXT)
    for key, value in draw(st.dictionaries(_KEY if not common else _TEXT, _TEXT, max_size=3)).items():
        if common and key in props.SYSTEM_KEYS:
            continue  # DELAY / immunity go the general path; other system names are refused there
        message.user_properties[key] = value
    sysp = message.system_properties
    sysp.tag = draw(_TEXT)
    sysp.keys.extend(draw(st.lists(_TEXT, max_size=3)))
    sysp.message_id = draw(_TEXT)
    sysp.born_host = draw(_TEXT)
    sysp.message_group = draw(_TEXT)
    sysp.message_type = draw(st.sampled_from([0, 1, 2, 3, 5, 6] if common else range(8)))
    if draw(st.booleans()):
        sysp.born_timestamp.CopyFrom(draw(_TS))
    if draw(st.booleans()):
        sysp.body_digest.type = draw(st.integers(0, 3))
        sysp.body_digest.checksum = draw(_TEXT)
    if draw(st.booleans()):
        sysp.trace_context = draw(_TEXT)
    encoding = draw(st.sampled_from([0, 1, 2]))
    sysp.body_encoding = encoding
    if encoding == pb.Encoding.GZIP and (common or draw(st.booleans())):
        message.body = (gzip.compress if draw(st.booleans()) else zlib.compress)(message.body)
    if not common:
        extra = draw(st.sampled_from(["", "delivery", "orphan", "receipt", "queue", "lite", "priority"]))
        if extra == "delivery":
            sysp.delivery_timestamp.CopyFrom(draw(_TS))
        elif extra == "orphan":
            sysp.orphaned_transaction_recovery_duration.seconds = draw(st.integers(0, 100))
        elif extra == "receipt":
            sysp.receipt_handle = draw(_TEXT)
        elif extra == "queue":
            sysp.queue_offset = draw(st.integers(-(2**63), 2**63 - 1))
        elif extra == "lite":
            sysp.lite_topic = draw(_TEXT)
        elif extra == "priority":
            sysp.priority = draw(st.integers(-(2**31), 2**31 - 1))
    return message


def _request(messages: list[Any]) -> bytes:
    return bytes(S.SendMessageRequest(messages=messages).SerializeToString())


@settings(max_examples=400, deadline=None)
@given(st.lists(_messages(common=True), min_size=1, max_size=4))
def test_what_clients_send_is_decoded_as_protobuf_decodes_it(messages: list[Any]) -> None:
    data = _request(messages)
    got = wire.send_lane(data)
    assert got is not None, "the common case must not fall back"
    assert got == _oracle(data)


@settings(max_examples=400, deadline=None)
@given(st.lists(_messages(common=False), min_size=0, max_size=4))
def test_any_request_is_decoded_as_protobuf_decodes_it_or_declined(messages: list[Any]) -> None:
    data = _request(messages)
    got = wire.send_lane(data)
    if got is not None:
        assert got == _oracle(data)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return wire.varint(number << 3 | wire_type) + (
        wire.varint(len(payload)) + payload if wire_type == 2 else payload
    )


def _varint(value: int) -> bytes:
    return wire.varint(value)


# raw fields of a SystemProperties, in any order, repeated, of a wrong wire type, unknown, or text that
# is not UTF-8: what no generated class writes, but a client's bytes may hold
_RAW_TEXT = st.one_of(_TEXT.map(str.encode), st.binary(max_size=6))
_RAW_SYSP_FIELD = st.one_of(
    st.tuples(st.sampled_from([1, 2, 3, 8, 12, 17, 18, 21]), st.just(2), _RAW_TEXT),
    st.tuples(
        st.sampled_from([5, 6, 13, 14, 16, 22]), st.just(0), st.integers(0, 2**64 - 1).map(wire.varint)
    ),
    st.tuples(st.sampled_from([4, 7, 11, 19]), st.just(2), st.binary(max_size=6)),
    st.tuples(st.integers(1, 40), st.sampled_from([0, 1, 2, 5]), st.binary(min_size=8, max_size=8)),
)


@st.composite
def _raw_message(draw: st.DrawFn) -> bytes:
    sysp = b"".join(_field(*f) for f in draw(st.lists(_RAW_SYSP_FIELD, max_size=6)))
    fields = [(3, 2, sysp), (1, 2, _field(2, 2, draw(_RAW_TEXT))), (4, 2, draw(_BODY))]
    entry = _field(1, 2, draw(_RAW_TEXT)) + _field(2, 2, draw(_RAW_TEXT))
    fields += draw(st.lists(st.sampled_from([(2, 2, entry), (3, 2, sysp), (1, 0, b"\x01"), (9, 2, b"")])))
    return b"".join(_field(*f) for f in draw(st.permutations(fields)))


@settings(max_examples=600, deadline=None)
@given(st.lists(_raw_message(), min_size=1, max_size=3), st.data())
@example([b"\x1a\x03\x8a\x01\x00"], None)  # message_group (17), a two-byte key
def test_raw_and_damaged_bytes_are_decoded_as_protobuf_decodes_them_or_declined(
    raw: list[bytes], data: Any
) -> None:
    request = b"".join(_field(1, 2, m) for m in raw)
    candidates = [request]
    if data is not None:  # and a cut, a flipped byte
        cut = data.draw(st.integers(0, len(request)))
        candidates.append(request[:cut])
        if request:
            at = data.draw(st.integers(0, len(request) - 1))
            candidates.append(
                request[:at] + bytes([request[at] ^ data.draw(st.integers(1, 255))]) + request[at + 1 :]
            )
    for candidate in candidates:
        got = wire.send_lane(candidate)
        if got is not None:
            assert got == _oracle(candidate)


def test_malformed_unusual_and_undecompressable_requests_are_declined() -> None:
    plain = pb.Message(body=b"x")
    plain.topic.name = "T"
    assert wire.send_lane(_request([plain])) is not None
    for data in (b"", b"\xff\xff\xff\xff", _request([plain])[:-1], b"\x0a\x03\x1a\x01\xff"):
        assert wire.send_lane(data) is None
    delayed = pb.Message()
    delayed.CopyFrom(plain)
    delayed.system_properties.delivery_timestamp.seconds = 5
    bad_gzip = pb.Message()
    bad_gzip.CopyFrom(plain)
    bad_gzip.system_properties.body_encoding = pb.Encoding.GZIP
    transactional = pb.Message()
    transactional.CopyFrom(plain)
    transactional.system_properties.message_type = pb.MessageType.TRANSACTION
    other_topic = pb.Message()
    other_topic.CopyFrom(plain)
    other_topic.topic.name = "U"
    for messages in ([delayed], [bad_gzip], [plain, transactional], [plain, other_topic]):
        assert wire.send_lane(_request(messages)) is None
    assert _oracle(_request([bad_gzip])) is errors.InvalidArgument  # the fallback's answer


# a batch's messages repeat their topic, tag, born host and born time (the decoder reuses what an earlier
# message decoded when the bytes are the same): repeats, changes and damage in any message
_REPEATED_FIELD = st.sampled_from(["topic", "namespace", "tag", "host", "stamp"])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(_REPEATED_FIELD, _RAW_TEXT), max_size=6),
    st.integers(2, 5),
    st.data(),
)
@example([("host", b"\xff")], 3, None)  # a later message's born host is not UTF-8: protobuf refuses it
@example([("stamp", b"\x08\x80")], 2, None)  # a later message's born time is truncated
def test_repeated_and_changed_fields_of_a_batch_are_decoded_as_protobuf_decodes_them(
    changes: list[tuple[str, bytes]], count: int, data: Any
) -> None:
    def sysp(tag: bytes, host: bytes, stamp: bytes, message_id: int) -> bytes:
        return b"".join(
            (_field(1, 2, tag), _field(3, 2, b"id-%d" % message_id), _field(8, 2, host), _field(7, 2, stamp))
        )

    def topic(name: bytes, namespace: bytes) -> bytes:
        return (_field(1, 2, namespace) if namespace else b"") + _field(2, 2, name)

    fields = {"topic": b"T", "namespace": b"", "tag": b"t", "host": b"127.0.0.1", "stamp": b"\x08\x01"}
    at = {
        i: data.draw(st.integers(0, count - 1)) if data is not None else count - 1
        for i in range(len(changes))
    }
    messages = []
    for n in range(count):
        for i, (name, value) in enumerate(changes):
            if at[i] == n:
                fields[name] = value
        message = _field(1, 2, topic(fields["topic"], fields["namespace"])) + _field(
            3, 2, sysp(fields["tag"], fields["host"], fields["stamp"], n)
        )
        messages.append(message + _field(4, 2, b"body"))
    request = b"".join(_field(1, 2, m) for m in messages)
    got = wire.send_lane(request)
    if got is not None:
        assert got == _oracle(request)
    if not changes:
        assert got is not None, "the common case must not fall back"
