"""Hand-encoded protobuf bytes of the gRPC door's per-message replies (pure, no I/O; compiled).

A batch SendMessage answers one ``SendResultEntry`` per message. Filling those through the generated
classes (``reply.entries.add(...)``, then ``SerializeToString``) costs ~1.3-2.3 µs per entry, the bytes
written here ~0.5: a fixed OK status, the message id, the offset. :func:`send_reply` produces exactly
what ``SerializeToString(deterministic=True)`` gives for the reply ``grpc_server`` filled before:
fields in number order, proto3 defaults left out, negative integers as ten byte varints
(``tests/property/test_grpc_wire.py`` holds both to the same bytes on generated results).

A send-lane batch's reply comes from its columns (:func:`lane_reply`). ReceiveMessage and PullMessage
stream one response per delivered message, written by :func:`delivered`: the fields
``convert.to_wire`` fills, in number order. Pure Python it costs more than ``to_wire`` plus
``SerializeToString`` (upb's setters are cheap); compiled with mypyc, with varints from tables (no
big-int masking, which kept every value boxed), it costs ~43k instructions per 1 KB message against
~53k (callgrind; the MD5 digest is ~15k of either).

The door's serializer passes ``bytes`` through unchanged (``server/grpc_decode.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from txmq.common import errors
from txmq.common import properties as props
from txmq.common.message import LeanMessage, MessageView
from txmq.protocol.grpc import convert

_VARINT_CACHE_MAX: Final = 1 << 14  # lengths and small numbers: one list lookup instead of a loop
_TWO_64: Final = 1 << 64
_INT63: Final = 1 << 62  # below it, compiled code keeps an int in a machine word
_TWO_28: Final = 1 << 28  # a varint of 15-28 bits: two table pieces


def _encode_varint(value: int) -> bytes:
    """The general encoder (builds the tables below; values below 0 or from 2**63 go here)."""
    if value < 0:  # a negative int32/int64 is its 64-bit two's complement: ten bytes
        value += _TWO_64
    out: list[int] = []
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINTS: Final = [_encode_varint(i) for i in range(_VARINT_CACHE_MAX)]
# the low 14 bits of a larger value: two bytes, both with the continuation bit
_LOW14: Final = [bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(_VARINT_CACHE_MAX)]


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint (negative values as their 64-bit two's complement)."""
    if 0 <= value < _VARINT_CACHE_MAX:
        return _VARINTS[value]
    if 0 < value < _INT63:  # 14 bits at a time from the tables (timestamps, offsets: no loop)
        out = _LOW14[value & 0x3FFF]
        value >>= 14
        while value >= _VARINT_CACHE_MAX:
            out += _LOW14[value & 0x3FFF]
            value >>= 14
        return out + _VARINTS[value]
    return _encode_varint(value)


def _field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field: tag, length, data."""
    return tag + varint(len(data)) + data


_OK_STATUS: Final = _field(b"\x0a", convert.OK_STATUS.SerializeToString())  # status (1) of reply and entry


# ---- SendMessageResponse -------------------------------------------------------------------------
def send_reply(results: Iterable[Any]) -> bytes:
    """``SendMessageResponse(status=OK, entries=[SendResultEntry(status=OK, message_id,
    transaction_id, offset, recall_handle) per result])`` serialized; ``results`` carry
    ``message_id``, ``transaction_id``, ``queue_offset`` and ``recall_handle`` (``SendResult``)."""
    parts = [_OK_STATUS]
    append = parts.append
    ok = _OK_STATUS
    for result in results:
        message_id = result.message_id.encode()
        entry = ok + b"\x12" + varint(len(message_id)) + message_id if message_id else ok
        if result.transaction_id:
            entry += _field(b"\x1a", result.transaction_id.encode())
        if result.queue_offset:
            entry += b"\x20" + varint(result.queue_offset)
        if result.recall_handle:
            entry += _field(b"\x2a", result.recall_handle.encode())
        append(b"\x12" + varint(len(entry)) + entry)
    return b"".join(parts)


# an entry's first pieces by its length (tag 2, length, the OK status; below 128) and a message id's by
# its length (tag 2, length; below 128): one table piece each instead of three
_ENTRY_HEADS: Final = [b"\x12" + _encode_varint(i) + _OK_STATUS for i in range(128)]
_ID_HEADS: Final = [b"\x12" + _encode_varint(i) for i in range(128)]


def lane_reply(message_ids: Sequence[str], queue_offsets: Sequence[int]) -> bytes:
    """:func:`send_reply` for a send-lane batch, from its columns (``LaneSent``): the lane takes
    neither transactional nor delayed messages, so an entry has no transaction id and no recall
    handle (the OK status, the message id, the offset), and no result object is built per message.

    Each entry's pieces go into one list joined once (no bytes concatenated per entry), its length
    counted from theirs; an offset's varint is two table pieces when it has 15 to 28 bits. The columns
    are walked by ``zip`` without ``strict`` (compiled, that is a loop over both; ``strict=True`` makes
    it a generic iterator and a tuple per entry), their lengths compared first."""
    if len(message_ids) != len(queue_offsets):
        raise ValueError(f"lane_reply: {len(message_ids)} message ids, {len(queue_offsets)} queue offsets")
    parts = [_OK_STATUS]
    ok = _OK_STATUS
    ok_size = len(ok)
    for message_id, queue_offset in zip(message_ids, queue_offsets):  # noqa: B905 - lengths compared above
        encoded = message_id.encode()
        size = len(encoded)
        id_head = _ID_HEADS[size] if size < 128 else b"\x12" + varint(size)
        entry = ok_size + len(id_head) + size if size else ok_size
        low = b""
        if queue_offset == 0:
            high = b""
        elif 0 < queue_offset < _VARINT_CACHE_MAX:
            high = _VARINTS[queue_offset]
            entry += 1 + len(high)
        elif _VARINT_CACHE_MAX <= queue_offset < _TWO_28:
            low = _LOW14[queue_offset & 0x3FFF]
            high = _VARINTS[queue_offset >> 14]
            entry += 1 + len(low) + len(high)
        else:
            high = varint(queue_offset)
            entry += 1 + len(high)
        if entry < 128:
            parts.append(_ENTRY_HEADS[entry])
        else:
            parts.append(b"\x12" + varint(entry) + ok)
        if size:
            parts.append(id_head)
            parts.append(encoded)
        if queue_offset:
            parts.append(b"\x20")
            if low:
                parts.append(low)
            parts.append(high)
    return b"".join(parts)


# ---- ReceiveMessageResponse{message} -------------------------------------------------------------
# body_digest (4) {type MD5, checksum: 32 hex digits follow}; after them body_encoding (5) IDENTITY and
# message_type (6) per MessageType value (UNSPECIFIED, 0, is sent as NORMAL, as convert.to_wire does)
_DIGEST_MD5: Final = b"\x22\x24\x08" + varint(convert.DIGEST_MD5) + b"\x12\x20"
_ENCODING_AND_TYPE: Final = [
    b"\x28" + varint(convert.ENCODING_IDENTITY) + b"\x30" + varint(value or convert.NORMAL)
    for value in range(8)
]


def _time(tag: bytes, ms: int) -> bytes:
    """A Timestamp or Duration of ``ms`` milliseconds (seconds 1, nanos 2; zeros left out)."""
    seconds = ms // 1000  # floored, as divmod (a tuple each call) in convert.set_timestamp
    rest = ms - seconds * 1000
    if not rest:
        if not seconds:
            return tag + b"\x00"
        data = b"\x08" + varint(seconds)
    elif seconds:
        data = b"\x08" + varint(seconds) + b"\x10" + varint(rest * 1_000_000)
    else:
        data = b"\x10" + varint(rest * 1_000_000)
    return tag + varint(len(data)) + data


def delivered(view: MessageView, invisible_ms: int | None) -> bytes:
    """``ReceiveMessageResponse(message=convert.to_wire(view, invisible_ms=invisible_ms))`` serialized:
    the same fields (protocol.md §2.4, MD5 body digest included) in field number order, written
    directly as parts joined once (the body is copied once).

    ``tests/property/test_grpc_wire.py`` holds both to the same parsed message."""
    body = view.body
    properties = view.properties
    message_id = view.message_id
    parts: list[bytes] = []  # system_properties (3), fields in number order
    add = parts.append
    tags = view.tags
    if tags:
        data = tags.encode()
        add(b"\x0a" + varint(len(data)) + data)
    for key in view.keys:
        data = key.encode()
        add(b"\x12" + varint(len(data)) + data)
    if message_id:
        data = message_id.encode()
        add(b"\x1a" + varint(len(data)) + data)
    add(_DIGEST_MD5 + convert.body_digest(body).encode() + _ENCODING_AND_TYPE[int(view.message_type)])
    add(_time(b"\x3a", view.born_timestamp_ms))
    if view.born_host:
        data = view.born_host.encode()
        add(b"\x42" + varint(len(data)) + data)
    add(_time(b"\x4a", view.store_timestamp_ms))
    if view.store_host:
        data = view.store_host.encode()
        add(b"\x52" + varint(len(data)) + data)
    if view.delivery_timestamp_ms is not None:
        add(_time(b"\x5a", view.delivery_timestamp_ms))
    receipt_handle = view.receipt_handle
    if receipt_handle:
        data = receipt_handle.encode()
        add(b"\x62" + varint(len(data)) + data)
    if view.queue_id:
        add(b"\x68" + varint(view.queue_id))
    add(b"\x70" + varint(view.queue_offset))
    if invisible_ms is not None:
        add(_time(b"\x7a", invisible_ms))
    attempt = view.delivery_attempt
    add(b"\x80\x01" + varint(attempt if attempt > 1 else 1))
    group = view.message_group
    if group:
        data = group.encode()
        add(b"\x8a\x01" + varint(len(data)) + data)
    if properties:
        origin_topic = properties.get(props.DLQ_ORIGIN_TOPIC)
        if origin_topic:
            data = origin_topic.encode()
            dlq = b"\x0a" + varint(len(data)) + data
            origin_id = properties.get(props.DLQ_ORIGIN_MESSAGE_ID, message_id)
            if origin_id:
                data = origin_id.encode()
                dlq += b"\x12" + varint(len(data)) + data
            add(b"\xa2\x01" + varint(len(dlq)) + dlq)
    sysp = b"".join(parts)
    # the message: topic (1), user properties (2), system properties (3), body (4)
    data = view.topic.encode()
    head = (
        b"\x0a" + varint(len(data) + 1 + len(varint(len(data)))) + b"\x12" + varint(len(data)) + data
        if data
        else b"\x0a\x00"
    )
    if properties:
        for key, value in props.user_properties(properties).items():
            k = key.encode()
            v = value.encode()
            entry = b"\x0a" + varint(len(k)) + k + b"\x12" + varint(len(v)) + v
            head += b"\x12" + varint(len(entry)) + entry
    head += b"\x1a" + varint(len(sysp))
    size = len(head) + len(sysp)
    if body:
        tail = b"\x22" + varint(len(body))
        size += len(tail) + len(body)
        return b"".join((b"\x12", varint(size), head, sysp, tail, body))
    return b"".join((b"\x12", varint(size), head, sysp))


# ---- SendMessageRequest, decoded straight into the send lane --------------------------------------
# What :func:`convert.to_lean` reads, and the fields official clients send beside it, each as
# (field number << 3 | wire type). Anything else - another field, a field of a known number with
# another wire type, a repeated singular message, an enum beyond one byte, a varint of ten bytes,
# text that is not UTF-8, a body that does not decompress - makes :func:`send_lane` answer None and the
# door parse the request with protobuf instead, which then gives the answer (the general path, or the
# error) exactly as before.
_TRANSACTION: Final = convert.TRANSACTION
_GZIP: Final = convert.ENCODING_GZIP
_SYSTEM_KEYS: Final = props.SYSTEM_KEYS
# tuple.__new__: a NamedTuple's own __new__ is interpreted Python (~2,700 instructions per message
# from compiled code, a sixth of this decoder's cost per 1 KB message)
_new_tuple: Final = tuple.__new__


class _Unusual(Exception):
    """The request needs the protobuf decoder (see above)."""


def _read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``; at most nine bytes (below 2**63)."""
    if pos >= end:
        raise _Unusual
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    pos += 1
    while pos < end and shift < 63:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise _Unusual


def _read_len(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(end, start) of the length-delimited payload at ``pos``."""
    size, pos = _read_varint(data, pos, end)
    if size > end - pos:
        raise _Unusual
    return pos + size, pos


def _read_text(data: bytes, pos: int, end: int) -> tuple[str, int]:
    stop, start = _read_len(data, pos, end)
    return data[start:stop].decode(), stop  # not UTF-8: UnicodeDecodeError, also a fallback


def _read_enum(data: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos >= end or data[pos] >= 0x80:
        raise _Unusual
    return data[pos], pos + 1


def _skip_varint(data: bytes, pos: int, end: int) -> int:
    """The position after the varint at ``pos`` (what :func:`_read_varint` accepts, its value not
    built: a Timestamp's seconds and nanos are five and four bytes, and shifting them into an int costs
    more than the scan)."""
    last = pos + 9 if pos + 9 < end else end
    while pos < last:
        byte = data[pos]
        pos += 1
        if byte < 0x80:
            return pos
    raise _Unusual


def _check_plain(data: bytes, pos: int, end: int, texts: int) -> None:
    """A Timestamp (varints 1, 2; ``texts`` 0) or a Digest (varint 1, text 2; ``texts`` 2) the lane
    does not read, checked as protobuf would parse it."""
    while pos < end:
        key, pos = _read_varint(data, pos, end)
        if key == 0x08 or (key == 0x10 and not texts):
            pos = _skip_varint(data, pos, end)
        elif key == 0x12 and texts:
            _, pos = _read_text(data, pos, end)
        else:
            raise _Unusual


def _read_topic(data: bytes, pos: int, end: int) -> str:
    """Resource.name (its namespace is checked and left, as the door leaves it)."""
    name = ""
    while pos < end:
        key, pos = _read_varint(data, pos, end)
        if key == 0x12:
            name, pos = _read_text(data, pos, end)
        elif key == 0x0A:
            _, pos = _read_text(data, pos, end)
        else:
            raise _Unusual
    return name


def _read_entry(data: bytes, pos: int, end: int, into: dict[str, str]) -> None:
    """One user_properties map entry (key 1, value 2; absent: empty; repeated: the last)."""
    name = ""
    value = ""
    while pos < end:
        key, pos = _read_varint(data, pos, end)
        if key == 0x0A:
            name, pos = _read_text(data, pos, end)
        elif key == 0x12:
            value, pos = _read_text(data, pos, end)
        else:
            raise _Unusual
    into[name] = value


class _Seen:
    """What a request's earlier messages held: a batch's messages repeat their topic, born host, tag
    and born time byte for byte, and the same bytes parse to the same value, so a repeat costs a slice
    and a compare instead of a decode (each a few hundred instructions per message)."""

    def __init__(self) -> None:
        self.topic_raw = b""  # the first message's topic (a Resource), as sent
        self.topic = ""  # its name: every message must name it
        self.host_raw = b""  # the first message's born host (the only one the lane uses)
        self.host = ""
        self.tags_raw = b""  # the last tag decoded
        self.tags = ""
        self.stamp_raw = b""  # the last born time checked


def _read_message(data: bytes, pos: int, end: int, seen: _Seen | None) -> tuple[str, LeanMessage, str]:
    """(topic, lane message, born host) of one Message; ``seen``: the request's first message's
    values (None: this is the first message)."""
    name = ""
    properties: dict[str, str] | None = None
    body = b""
    tags = ""
    keys: list[str] | None = None
    message_id = ""
    group = ""
    born_host = ""
    encoding = 0
    kind = 0
    seen_topic = False
    seen_sysp = False
    while pos < end:
        key, pos = _read_varint(data, pos, end)
        if key == 0x22:  # body (4)
            stop, start = _read_len(data, pos, end)
            body = data[start:stop]
            pos = stop
        elif key == 0x1A:  # system_properties (3)
            if seen_sysp:
                raise _Unusual  # protobuf merges the two
            seen_sysp = True
            stop, pos = _read_len(data, pos, end)
            seen_digest = False
            seen_born = False
            while pos < stop:
                key, pos = _read_varint(data, pos, stop)
                if key == 0x0A:  # tag (1)
                    inner, start = _read_len(data, pos, stop)
                    if seen is not None:
                        raw = data[start:inner]
                        if raw == seen.tags_raw:
                            tags = seen.tags
                        else:
                            tags = raw.decode()
                            seen.tags_raw = raw
                            seen.tags = tags
                    else:
                        tags = data[start:inner].decode()
                    pos = inner
                elif key == 0x12:
                    text, pos = _read_text(data, pos, stop)
                    if keys is None:
                        keys = [text]
                    else:
                        keys.append(text)
                elif key == 0x1A:
                    message_id, pos = _read_text(data, pos, stop)
                elif key == 0x28:
                    encoding, pos = _read_enum(data, pos, stop)
                elif key == 0x30:
                    kind, pos = _read_enum(data, pos, stop)
                elif key == 0x42:  # born_host (8): the first message's is the request's
                    inner, start = _read_len(data, pos, stop)
                    if seen is not None:
                        raw = data[start:inner]
                        born_host = seen.host if raw == seen.host_raw else raw.decode()
                    else:
                        born_host = data[start:inner].decode()
                    pos = inner
                elif key == 0x8A:  # message_group (17): (17 << 3) | 2
                    group, pos = _read_text(data, pos, stop)
                elif key == 0x3A and not seen_born:  # born_timestamp (7)
                    seen_born = True
                    inner, start = _read_len(data, pos, stop)
                    if seen is not None:
                        raw = data[start:inner]
                        if raw != seen.stamp_raw:
                            _check_plain(data, start, inner, 0)
                            seen.stamp_raw = raw
                    else:
                        _check_plain(data, start, inner, 0)
                    pos = inner
                elif key == 0x22 and not seen_digest:  # body_digest (4)
                    seen_digest = True
                    inner, start = _read_len(data, pos, stop)
                    _check_plain(data, start, inner, 2)
                    pos = inner
                elif key == 0x92:  # trace_context (18)
                    _, pos = _read_text(data, pos, stop)
                else:  # delivery time, transaction recovery, a reply-only field, an unknown one
                    raise _Unusual
        elif key == 0x0A:  # topic (1)
            if seen_topic:
                raise _Unusual
            seen_topic = True
            stop, start = _read_len(data, pos, end)
            if seen is not None and data[start:stop] == seen.topic_raw:
                name = seen.topic
            else:
                name = _read_topic(data, start, stop)
            pos = stop
        elif key == 0x12:  # a user_properties entry (2)
            stop, start = _read_len(data, pos, end)
            if properties is None:
                properties = {}
            _read_entry(data, start, stop, properties)
            pos = stop
        else:
            raise _Unusual
    if kind == _TRANSACTION or (seen is not None and name != seen.topic):
        raise _Unusual  # the general path's (convert.to_lean answers None)
    if properties is None:
        properties = {}
    else:
        for key_name in properties:
            if key_name in _SYSTEM_KEYS:
                # DELAY / check immunity: the general path's; any other is refused there (reserved)
                raise _Unusual
    if encoding == _GZIP:
        body = convert.gunzip(body)  # fails: protobuf's path raises the same for it, in order
    lean: LeanMessage = _new_tuple(
        LeanMessage,
        (
            body,
            properties,
            tags or None,
            () if keys is None else tuple(keys),
            message_id or None,
            group or None,
        ),
    )
    return name, lean, born_host


def _first_seen(data: bytes, pos: int, end: int, topic: str, born_host: str) -> _Seen:
    """A :class:`_Seen` of the request's first message (at ``pos``..``end``, already decoded)."""
    seen = _Seen()
    seen.topic = topic
    seen.host = born_host
    seen.host_raw = born_host.encode()  # the bytes it decoded from (UTF-8 round trips)
    while pos < end:  # the topic field's bytes: the first field 1 of the message
        key, pos = _read_varint(data, pos, end)
        if key == 0x0A:
            stop, start = _read_len(data, pos, end)
            seen.topic_raw = data[start:stop]
            break
        if key & 7 == 2:
            pos, _ = _read_len(data, pos, end)
        else:
            raise _Unusual  # pragma: no cover - the message decoded: only length-delimited fields
    return seen


def send_lane(data: bytes) -> tuple[str, list[LeanMessage], str] | None:
    """``convert.to_lean(SendMessageRequest.FromString(data).messages)`` and the first message's
    born host, read from the request's bytes without building protobuf objects; None when the
    request is not the common case (see above: the caller parses it with protobuf then).
    ``tests/property/test_grpc_send_lane.py`` holds it to the protobuf decode."""
    try:
        end = len(data)
        pos = 0
        topic: str | None = None
        born_host = ""
        seen: _Seen | None = None
        lane: list[LeanMessage] = []
        while pos < end:
            key, pos = _read_varint(data, pos, end)
            if key != 0x0A:
                raise _Unusual
            stop, start = _read_len(data, pos, end)
            name, lean, host = _read_message(data, start, stop, seen)
            if topic is None:
                topic = name
                born_host = host
                if stop < end:  # more messages follow: they are read against this one's values
                    seen = _first_seen(data, start, stop, name, host)
            lane.append(lean)
            pos = stop
        if topic is None:
            return None  # no message: the protobuf path refuses it
        return topic, lane, born_host
    except (_Unusual, UnicodeDecodeError, errors.TxmqError):
        return None
