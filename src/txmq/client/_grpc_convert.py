"""Pure conversions between the SDK's types and ``apache.rocketmq.v2`` messages (client side, no I/O).

The v2 protocol has no 4.x delay levels: a ``delay_level`` becomes a delivery timestamp computed with
RocketMQ's standard level table (``1s 5s 10s 30s 1m ... 2h``), which is what a default broker applies.
A status other than OK becomes the matching ``TxmqError`` (``errors.for_code``), so callers see the same
hierarchy, with the same ``retriable`` flags, on both transports.
"""

from __future__ import annotations

import gzip
import socket
import time
import zlib
from typing import Any, Final

import grpc

from txmq.common import errors, msgid
from txmq.common import properties as props
from txmq.common.message import Message, MessageQueue, MessageType, MessageView
from txmq.protocol.grpc import pb
from txmq.protocol.grpc.convert import duration_ms, set_duration, set_timestamp, timestamp_ms

OK: Final = int(pb.Code.OK)
MESSAGE_NOT_FOUND: Final = int(pb.Code.MESSAGE_NOT_FOUND)
OFFSET_NOT_FOUND: Final = int(pb.Code.OFFSET_NOT_FOUND)
ILLEGAL_OFFSET: Final = int(pb.Code.ILLEGAL_OFFSET)
# RocketMQ's messageDelayLevel default, in seconds (levels 1..18).
DELAY_LEVEL_S: Final = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)

_RPC_ERRORS: Final = {
    grpc.StatusCode.UNAVAILABLE: errors.ConnectionError_,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.RequestTimeout,
    grpc.StatusCode.UNIMPLEMENTED: errors.Unsupported,
    grpc.StatusCode.CANCELLED: errors.ConnectionError_,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.TooManyRequests,
}


def _born_host() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:  # pragma: no cover - hosts without a resolvable name
        return "127.0.0.1"


BORN_HOST: Final = _born_host()


def check(status: Any, what: str) -> None:
    """Raise the ``TxmqError`` a non-OK v2 status stands for."""
    code = int(status.code)
    if code != OK:
        raise errors.for_code(code)(f"{what}: {status.message or code}")


def rpc_error(exc: grpc.aio.AioRpcError, what: str) -> errors.TxmqError:
    """A transport-level gRPC failure as a ``TxmqError`` (UNAVAILABLE and timeouts are retriable)."""
    cls = _RPC_ERRORS.get(exc.code(), errors.ConnectionError_)
    return cls(f"{what}: {exc.code().name} {exc.details() or ''}".strip())


def resource(name: str) -> Any:
    return pb.Resource(name=name)


def wire_message(message: Message, message_id: str | None = None, now_ms: int | None = None) -> Any:
    """A v2 ``Message`` for SendMessage: every field official brokers read (protocol.md §2.4)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    wire = pb.Message(body=bytes(message.body))
    wire.topic.name = message.topic
    user = props.user_properties(message.properties)
    if user:
        wire.user_properties.update(user)
    sysp = wire.system_properties
    sysp.message_id = message_id or message.message_id or msgid.new_message_id(now)
    sysp.body_encoding = pb.Encoding.IDENTITY
    sysp.message_type = int(message.message_type)
    set_timestamp(sysp.born_timestamp, now)
    sysp.born_host = BORN_HOST
    if message.tags:
        sysp.tag = message.tags
    if message.keys:
        sysp.keys.extend(message.keys)
    if message.message_group is not None:
        sysp.message_group = message.message_group
    deliver = delivery_ms(message, now)
    if deliver is not None:
        set_timestamp(sysp.delivery_timestamp, deliver)
    if message.transactional and message.check_immunity_s is not None:
        set_duration(sysp.orphaned_transaction_recovery_duration, message.check_immunity_s * 1000)
    return wire


def delivery_ms(message: Message, now_ms: int) -> int | None:
    if message.delivery_timestamp_ms is not None:
        return message.delivery_timestamp_ms
    if message.delay_level:
        level = min(message.delay_level, len(DELAY_LEVEL_S))
        return now_ms + DELAY_LEVEL_S[level - 1] * 1000
    return None


def _body(wire: Any) -> bytes:
    body: bytes = wire.body
    if wire.system_properties.body_encoding != pb.Encoding.GZIP:
        return body
    try:
        return gzip.decompress(body) if body[:2] == b"\x1f\x8b" else zlib.decompress(body)
    except (OSError, zlib.error, EOFError) as exc:
        raise errors.ProtocolError(f"a GZIP message body does not decompress: {exc}") from None


def _optional(sysp: Any, name: str) -> Any:
    return getattr(sysp, name) if sysp.HasField(name) else None


def view_of(wire: Any, *, transaction_id: str | None = None) -> MessageView:
    """A delivered (or check-back) v2 message as the SDK's ``MessageView``."""
    sysp = wire.system_properties
    delivery = _optional(sysp, "delivery_timestamp")
    attempt = max(1, int(sysp.delivery_attempt or 1))
    properties = dict(wire.user_properties)
    if sysp.HasField("dead_letter_queue"):
        properties[props.DLQ_ORIGIN_TOPIC] = sysp.dead_letter_queue.topic
        properties[props.DLQ_ORIGIN_MESSAGE_ID] = sysp.dead_letter_queue.message_id
    return MessageView(
        topic=wire.topic.name, body=_body(wire), message_id=sysp.message_id,
        queue_id=int(sysp.queue_id), queue_offset=int(sysp.queue_offset), commit_log_offset=-1,
        born_timestamp_ms=timestamp_ms(sysp.born_timestamp),
        store_timestamp_ms=timestamp_ms(sysp.store_timestamp) if sysp.HasField("store_timestamp") else 0,
        tags=_optional(sysp, "tag") or None, keys=tuple(sysp.keys), properties=properties,
        message_group=_optional(sysp, "message_group") or None,
        delivery_timestamp_ms=timestamp_ms(delivery) if delivery is not None else None,
        message_type=MessageType(sysp.message_type) if sysp.message_type else MessageType.NORMAL,
        reconsume_times=attempt - 1, delivery_attempt=attempt,
        receipt_handle=_optional(sysp, "receipt_handle") or None, transaction_id=transaction_id,
        born_host=sysp.born_host, store_host=sysp.store_host,
    )  # fmt: skip


def queue_of(entry: Any) -> MessageQueue:
    return MessageQueue(entry.topic.name, int(entry.id), entry.broker.name)


def address_of(entry: Any) -> str | None:
    """``host:port`` of a route entry's broker (the first address), or None if it names none."""
    addresses = entry.broker.endpoints.addresses
    return f"{addresses[0].host}:{addresses[0].port}" if addresses else None


def wire_queue(mq: MessageQueue) -> Any:
    entry = pb.MessageQueue(id=mq.queue_id)
    entry.topic.name = mq.topic
    entry.broker.name = mq.broker_name
    return entry


def backoff_schedule_ms(policy: Any) -> tuple[int, ...]:
    """A settings reply's retry back-off as a schedule: customized steps, or exponential expanded."""
    if policy.HasField("customized_backoff"):
        return tuple(duration_ms(d) for d in policy.customized_backoff.next)
    if policy.HasField("exponential_backoff"):
        exp = policy.exponential_backoff
        initial, cap = duration_ms(exp.initial), duration_ms(exp.max)
        multiplier = exp.multiplier or 2.0
        return tuple(min(cap, int(initial * multiplier**i)) for i in range(max(1, policy.max_attempts)))
    return ()
