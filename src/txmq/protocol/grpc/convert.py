"""Pure conversions between apache.rocketmq.v2 wire messages and txmq's own types (no I/O).

Inbound: a client's ``Message`` becomes a :class:`txmq.common.message.Message`. Outbound: a
:class:`MessageView` becomes a delivered ``Message`` carrying every field official clients need
(protocol.md §2.4): ``body_encoding`` and ``body_digest`` above all (Python raises without the first,
Node cannot decode without the second).
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from txmq.common import errors, limits
from txmq.common import properties as props
from txmq.common.message import LeanMessage, Message, MessageType, MessageView
from txmq.protocol.grpc import pb

_ENCODING_IDENTITY = pb.Encoding.IDENTITY
_ENCODING_GZIP = pb.Encoding.GZIP
_DIGEST_MD5 = pb.DigestType.MD5
_TRANSACTION = pb.MessageType.TRANSACTION
_NORMAL = int(MessageType.NORMAL)
ENCODING_IDENTITY: int = _ENCODING_IDENTITY  # for wire.delivered and wire.send_lane
ENCODING_GZIP: int = _ENCODING_GZIP
TRANSACTION: int = _TRANSACTION
DIGEST_MD5: int = _DIGEST_MD5
NORMAL: int = _NORMAL
_OK = pb.Code.OK


# ---- time ------------------------------------------------------------------------------------
def timestamp_ms(ts: Any) -> int:
    """A protobuf Timestamp in epoch milliseconds (seconds + nanos: Python sends whole seconds)."""
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def set_timestamp(ts: Any, ms: int) -> None:
    ts.seconds, rest = divmod(ms, 1000)
    ts.nanos = rest * 1_000_000


def duration_ms(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


def set_duration(duration: Any, ms: int) -> None:
    duration.seconds, rest = divmod(ms, 1000)
    duration.nanos = rest * 1_000_000


# ---- status ----------------------------------------------------------------------------------
def status(code: int = errors.OK, message: str = "OK") -> Any:
    return pb.Status(code=code, message=message)


OK_STATUS: Any = status()


# ---- inbound ---------------------------------------------------------------------------------
def to_message(wire: Any) -> Message:
    """A client's v2 Message as a txmq Message (the broker validates it)."""
    sysp = wire.system_properties
    body: bytes = wire.body
    if sysp.body_encoding == _ENCODING_GZIP:
        body = gunzip(body)
    # optional strings read "" when unset, and "" means absent here too: no HasField needed (this runs
    # for every message of every send, so each protobuf access counts)
    deliver = timestamp_ms(sysp.delivery_timestamp) if sysp.HasField("delivery_timestamp") else None
    immunity = None
    if sysp.HasField("orphaned_transaction_recovery_duration"):
        immunity = max(0, duration_ms(sysp.orphaned_transaction_recovery_duration) // 1000)
    keys = sysp.keys
    user = wire.user_properties
    if user:
        _check_user_keys(user)
    return Message(
        topic=wire.topic.name,
        body=body,
        tags=sysp.tag or None,
        keys=tuple(keys) if keys else (),
        properties=dict(user) if user else {},
        message_group=sysp.message_group or None,
        delivery_timestamp_ms=deliver if deliver else None,
        message_id=sysp.message_id or None,
        transactional=sysp.message_type == _TRANSACTION,
        check_immunity_s=immunity,
    )


# user properties that keep a message off the send lane: the general path copies them into the record
NOT_LEAN_USER: tuple[str, ...] = (props.DELAY, props.CHECK_IMMUNITY_TIME_IN_SECONDS)
# system property names a v2 client may not set as user properties (they were dropped without a word);
# the two above are honoured on purpose
_RESERVED_USER_KEYS = props.SYSTEM_KEYS - frozenset(NOT_LEAN_USER)


def _check_user_keys(user: Any) -> None:
    """ILLEGAL_MESSAGE_PROPERTY_KEY for a user property named like a system one, as the Apache proxy
    answers ("property is used by system")."""
    for key in user:
        if key in _RESERVED_USER_KEYS:
            raise errors.InvalidProperty(f"property {key} is used by the system; choose another name")


def to_lean(wires: Any) -> tuple[str, list[LeanMessage]] | None:
    """The send lane's topic and messages when every message of the request is NORMAL or FIFO (no
    delivery time, not transactional, no orphaned-transaction duration) and all share one topic;
    None when :func:`to_message` must convert them. Fields as :func:`to_message` gives them.

    One pass, each protobuf field read once (every access costs; this runs per message sent). A
    message that does not decompress raises the error :func:`to_message` raises for it, even when a
    later message would have sent the request the general way: that way converts every message too,
    in order, so it fails the same."""
    topic: str = wires[0].topic.name
    lane: list[LeanMessage] = []
    append = lane.append
    for wire in wires:
        sysp = wire.system_properties
        if (
            sysp.message_type == _TRANSACTION
            or sysp.HasField("delivery_timestamp")
            or sysp.HasField("orphaned_transaction_recovery_duration")
            or wire.topic.name != topic
        ):
            return None
        user = wire.user_properties
        if user:
            if any(key in user for key in NOT_LEAN_USER):
                return None
            _check_user_keys(user)
            properties = dict(user)  # no system names left: the two above declined, the rest raised
        else:
            properties = {}
        body: bytes = wire.body
        if sysp.body_encoding == _ENCODING_GZIP:
            body = gunzip(body)
        keys = sysp.keys
        append(
            LeanMessage(
                body,
                properties,
                sysp.tag or None,
                tuple(keys) if keys else (),
                sysp.message_id or None,
                sysp.message_group or None,
            )
        )
    return topic, lane


def gunzip(body: bytes) -> bytes:
    """GZIP bodies: the Java client compresses with zlib (deflate) despite the enum's name; take both.

    Decompression stops one byte past the body limit: a few KiB of compressed zeros must not expand
    into gigabytes of broker memory (a decompression bomb) before the size check rejects them."""
    limit = limits.body_bytes_max
    try:
        wbits = 16 + zlib.MAX_WBITS if body[:2] == b"\x1f\x8b" else zlib.MAX_WBITS
        inflater = zlib.decompressobj(wbits)
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit or inflater.unconsumed_tail:
            raise errors.MessageTooLarge("the decompressed message body", len(out), limit)
        if not inflater.eof:
            raise EOFError("the compressed stream is truncated")
    except (OSError, zlib.error, EOFError) as exc:
        raise errors.InvalidArgument(
            f"the message body is marked GZIP but does not decompress: {exc}"
        ) from None
    return out


# ---- outbound --------------------------------------------------------------------------------
def body_digest(body: bytes) -> str:
    """MD5 of the body in upper-case hex, as the Apache proxy sends it."""
    return hashlib.md5(body, usedforsecurity=False).hexdigest().upper()


def to_wire(view: MessageView, *, invisible_ms: int | None = None, into: Any = None) -> Any:
    """A delivered message with every field official clients read (protocol.md §2.4).

    ``into``: an empty ``Message`` to fill, e.g. ``response.message`` of a ReceiveMessageResponse, so a
    receive streaming thousands of messages does not build each one twice (wrapping a finished message
    in its response copies it). Fields are assigned through locals: every protobuf access costs.
    """
    wire = pb.Message() if into is None else into
    wire.body = view.body
    wire.topic.name = view.topic
    properties = view.properties
    if properties:
        user = props.user_properties(properties)
        if user:
            wire.user_properties.update(user)
    sysp = wire.system_properties
    sysp.message_id = view.message_id
    sysp.body_encoding = _ENCODING_IDENTITY
    digest = sysp.body_digest
    digest.type = _DIGEST_MD5
    digest.checksum = body_digest(view.body)
    sysp.message_type = int(view.message_type) or _NORMAL
    seconds, ms = divmod(view.born_timestamp_ms, 1000)
    born = sysp.born_timestamp
    born.seconds, born.nanos = seconds, ms * 1_000_000
    seconds, ms = divmod(view.store_timestamp_ms, 1000)
    stored = sysp.store_timestamp
    stored.seconds, stored.nanos = seconds, ms * 1_000_000
    sysp.born_host = view.born_host
    sysp.store_host = view.store_host
    sysp.queue_id = view.queue_id
    sysp.queue_offset = view.queue_offset
    sysp.delivery_attempt = view.delivery_attempt if view.delivery_attempt > 1 else 1
    if view.tags:
        sysp.tag = view.tags
    if view.keys:
        sysp.keys.extend(view.keys)
    if view.message_group:
        sysp.message_group = view.message_group
    if view.delivery_timestamp_ms is not None:
        set_timestamp(sysp.delivery_timestamp, view.delivery_timestamp_ms)
    if view.receipt_handle:
        sysp.receipt_handle = view.receipt_handle
    if invisible_ms is not None:
        set_duration(sysp.invisible_duration, invisible_ms)
    origin_topic = properties.get(props.DLQ_ORIGIN_TOPIC) if properties else None
    if origin_topic:
        sysp.dead_letter_queue.topic = origin_topic
        sysp.dead_letter_queue.message_id = properties.get(props.DLQ_ORIGIN_MESSAGE_ID, view.message_id)
    return wire
