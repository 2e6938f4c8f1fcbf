"""Messages as txmq's services see them, independent of any wire protocol.

``Message`` is what a producer sends; ``MessageView`` is what a consumer gets back (a stored message
plus its queue position, delivery attempt and receipt handle). Both are frozen.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from txmq.common import errors, limits, names
from txmq.common.fastinit import slot_init

_EMPTY: Mapping[str, str] = MappingProxyType({})
EMPTY_PROPERTIES: Mapping[str, str] = _EMPTY  # a Message's default properties (client/_batchsend.c knows it)
_BODY_TYPES = (bytes, bytearray, memoryview)
_body_of = operator.attrgetter("body")  # the field as it is: compiled, ``self.body`` checks for bytes first
_TOPICS_OK: set[str] = set()  # topics names.validate_topic passed (a user's: allow_system=False)
_TOPICS_OK_MAX = 1024


_T = TypeVar("_T")


def bytes_body(body: Any) -> Any:
    """A bytearray or memoryview body as bytes (what every send path, compiled or not, reads); any
    other object is kept, for ``Message.validate`` to refuse with ``InvalidArgument``."""
    return bytes(body) if isinstance(body, bytearray | memoryview) else body


def _message_init(cls: type[_T]) -> type[_T]:
    return slot_init(cls, coerce={"body": (bytes, bytes_body)})


class MessageType(enum.IntEnum):
    """apache.rocketmq.v2.MessageType values."""

    NORMAL = 1
    FIFO = 2
    DELAY = 3
    TRANSACTION = 4


class TopicMessageType(enum.IntEnum):
    """What a topic accepts: one type, or MIXED (every type)."""

    NORMAL = 1
    FIFO = 2
    DELAY = 3
    TRANSACTION = 4
    MIXED = 5

    def accepts(self, message_type: MessageType) -> bool:
        return self is TopicMessageType.MIXED or self.value == message_type.value

    def accepted(self) -> tuple[MessageType, ...]:
        if self is TopicMessageType.MIXED:
            return tuple(MessageType)
        return (MessageType(self.value),)


class SysFlag(enum.IntFlag):
    """RocketMQ MessageSysFlag bits (stored in every CommitLog record)."""

    NONE = 0
    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    INNER_BATCH = 0x80


TRANSACTION_MASK = 0xC


def check_content(body_size: int, tags: str | None, keys: Sequence[str], message_group: str | None) -> None:
    """The checks of a message's body size, tag, keys and message group (``Message.validate`` and the
    broker's send lane share them); raises a specific ``InvalidArgument``."""
    if body_size == 0:
        raise errors.MessageBodyEmpty("the message body is empty")
    if body_size > limits.body_bytes_max:
        raise errors.MessageTooLarge("message body", body_size, limits.body_bytes_max)
    if tags is not None:
        if not tags or tags.strip() != tags or "||" in tags:
            raise errors.InvalidTag(f"tag {tags!r} is empty, padded or contains '||'")
        if len(tags.encode()) > limits.tag_bytes_max:
            raise errors.InvalidTag(f"tag is longer than {limits.tag_bytes_max} bytes")
    if len(keys) > limits.keys_count_max:
        raise errors.InvalidKey(f"{len(keys)} keys, over the limit of {limits.keys_count_max}")
    for key in keys:
        if not key or " " in key or len(key.encode()) > limits.key_bytes_max:
            raise errors.InvalidKey(f"key {key[:64]!r} is empty, contains a space or is too long")
    if message_group is not None and (
        not message_group or len(message_group.encode()) > limits.message_group_bytes_max
    ):
        raise errors.InvalidMessageGroup("the message group is empty or too long")


@_message_init  # one is built per message of every send; a bytearray or memoryview body is stored as bytes
@dataclass(frozen=True, slots=True)
class Message:
    """A message to send.

    >>> Message(topic="orders", body=b"{}", tags="created", keys=("order-1",))
    Message(topic='orders', ...)
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    message_group: str | None = None
    delivery_timestamp_ms: int | None = None
    delay_level: int | None = None
    message_id: str | None = None
    transactional: bool = False
    check_immunity_s: int | None = None

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, body={len(self.body)} bytes, "
            f"tags={self.tags!r}, keys={self.keys!r})"
        )

    @property
    def message_type(self) -> MessageType:
        if self.transactional:
            return MessageType.TRANSACTION
        if self.message_group is not None:
            return MessageType.FIFO
        if self.delivery_timestamp_ms is not None or self.delay_level:
            return MessageType.DELAY
        return MessageType.NORMAL

    def validate(self) -> None:
        """Client-side checks with the broker's limits; raises a specific ``InvalidArgument``."""
        topic = self.topic
        if type(topic) is not str or topic not in _TOPICS_OK:  # a topic is checked once (per 1,024)
            names.validate_topic(topic)
            if len(_TOPICS_OK) >= _TOPICS_OK_MAX:
                _TOPICS_OK.clear()
            _TOPICS_OK.add(topic)
        if not isinstance(_body_of(self), _BODY_TYPES):
            raise errors.InvalidArgument("the message body must be bytes")
        check_content(len(self.body), self.tags, self.keys, self.message_group)
        delayed = self.delivery_timestamp_ms is not None or bool(self.delay_level)
        if self.message_group is not None and (delayed or self.transactional):
            raise errors.MessageTypeConflict(
                "a FIFO message (message_group) cannot also be delayed or transactional"
            )
        if self.delivery_timestamp_ms is not None and self.delivery_timestamp_ms < 0:
            raise errors.InvalidDeliveryTime("the delivery timestamp is negative")
        if self.delay_level is not None and self.delay_level < 0:
            raise errors.InvalidDeliveryTime("the delay level is negative")


class LeanMessage(NamedTuple):
    """A NORMAL or FIFO message on the send lane: no delay, not transactional, no check immunity.

    ``properties`` are the user properties only (no system key), in the order the client sent them;
    the lane (``SendService.send_lean``) adds the system properties exactly as the general path does,
    so the stored record is the same as for the equivalent :class:`Message`
    (tests/property/test_send_lane.py)."""

    body: bytes
    properties: dict[str, str]
    tags: str | None
    keys: tuple[str, ...]
    message_id: str | None
    message_group: str | None


@slot_init  # one is built per delivered message
@dataclass(frozen=True, slots=True)
class MessageView:
    """A delivered message: the stored message plus where it sits and how it was delivered."""

    topic: str
    body: bytes
    message_id: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    tags: str | None = None
    keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    message_group: str | None = None
    delivery_timestamp_ms: int | None = None
    message_type: MessageType = MessageType.NORMAL
    reconsume_times: int = 0
    delivery_attempt: int = 1
    receipt_handle: str | None = None
    transaction_id: str | None = None
    born_host: str = ""
    store_host: str = ""
    store_size: int = 0
    # The stored ``k\x01v\x02`` bytes that ``properties`` decodes, when the view was made from a record
    # as is: the remoting pull path writes them verbatim instead of encoding every property again.
    raw_properties: bytes | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return (
            f"MessageView(topic={self.topic!r}, queue={self.queue_id}, offset={self.queue_offset}, "
            f"id={self.message_id!r}, body={len(self.body)} bytes)"
        )


@slot_init  # one is built per send result whose queue the client did not name
@dataclass(frozen=True, slots=True)
class MessageQueue:
    topic: str
    queue_id: int
    broker_name: str = "broker-a"


@slot_init  # one is built per message of every send (a batch's too)
@dataclass(frozen=True, slots=True)
class SendResult:
    message_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    offset_message_id: str | None = None
    recall_handle: str | None = None
