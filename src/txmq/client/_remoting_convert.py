"""Pure conversions between the SDK's message types and the remoting protocol's (no I/O).

4.x carries every message field as a property (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``DELAY``,
``__SHARDINGKEY``, ``TRAN_MSG``, ``PGROUP``); a delivered message from a retry topic names its real
topic in ``RETRY_TOPIC``, which the view restores so listeners see the topic they subscribed to.
"""

from __future__ import annotations

from collections.abc import Mapping

from txmq.common import errors
from txmq.common import properties as props
from txmq.common.message import Message, MessageType, MessageView
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.protocol.remoting.message_codec import WireMessage


def message_properties(message: Message, message_id: str, producer_group: str) -> dict[str, str]:
    """The property map a 4.x broker expects for ``message`` (user properties plus system keys)."""
    result = {k: v for k, v in message.properties.items() if k not in props.SYSTEM_KEYS}
    if message.tags:
        result[props.TAGS] = message.tags
    if message.keys:
        result[props.KEYS] = props.KEY_SEPARATOR.join(message.keys)
    result[props.UNIQ_KEY] = message_id
    if message.message_group is not None:
        result[props.SHARDING_KEY] = message.message_group
    if message.delay_level:
        result[props.DELAY] = str(message.delay_level)
    if message.delivery_timestamp_ms is not None:
        result[props.TIMER_DELIVER_MS] = str(message.delivery_timestamp_ms)  # RocketMQ 5's timer property
    if message.transactional:
        result[props.TRAN_MSG] = "true"
        if message.check_immunity_s is not None:
            result[props.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(message.check_immunity_s)
    if producer_group:
        result[props.PRODUCER_GROUP] = producer_group
    return result


def sys_flag_of(message: Message) -> int:
    return TRANSACTION_PREPARED_TYPE if message.transactional else 0


def _message_type(decoded: Mapping[str, str]) -> MessageType:
    name = decoded.get(props.MESSAGE_TYPE, "")
    if name in MessageType.__members__:
        return MessageType[name]
    if decoded.get(props.SHARDING_KEY):
        return MessageType.FIFO
    if decoded.get(props.TRAN_MSG) == "true":
        return MessageType.TRANSACTION
    if decoded.get(props.DELAY) or decoded.get(props.TIMER_DELIVER_MS):
        return MessageType.DELAY
    return MessageType.NORMAL


def view_of(wire: WireMessage, *, transaction_id: str | None = None) -> MessageView:
    """A consumer's (or a check-back's) view of a message record."""
    p = wire.properties
    keys = tuple(k for k in p.get(props.KEYS, "").split(props.KEY_SEPARATOR) if k)
    deliver = p.get(props.TIMER_DELIVER_MS, "")
    reconsume = wire.reconsume_times
    if props.RECONSUME_TIME in p and p[props.RECONSUME_TIME].isdigit():
        reconsume = int(p[props.RECONSUME_TIME])
    return MessageView(
        topic=p.get(props.RETRY_TOPIC) or wire.topic,
        body=wire.body,
        message_id=p.get(props.UNIQ_KEY) or wire.offset_msg_id,
        queue_id=wire.queue_id,
        queue_offset=wire.queue_offset,
        commit_log_offset=wire.commit_log_offset,
        born_timestamp_ms=wire.born_timestamp,
        store_timestamp_ms=wire.store_timestamp,
        tags=p.get(props.TAGS) or None,
        keys=keys,
        properties=p,
        message_group=p.get(props.SHARDING_KEY) or None,
        delivery_timestamp_ms=int(deliver) if deliver.isdigit() else None,
        message_type=_message_type(p),
        reconsume_times=reconsume,
        delivery_attempt=reconsume + 1,
        transaction_id=transaction_id or p.get(props.TRANSACTION_ID) or None,
        born_host=f"{wire.born_host[0]}:{wire.born_host[1]}",
        store_host=f"{wire.store_host[0]}:{wire.store_host[1]}",
        store_size=wire.store_size,
    )


def parse_tags(expression: str) -> frozenset[str] | None:
    """The tags a TAG expression accepts, or ``None`` for every tag (``*`` or empty).

    >>> sorted(parse_tags("a || b"))
    ['a', 'b']
    """
    text = expression.strip()
    if not text or text == "*":
        return None
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    if not tags:
        raise errors.InvalidFilter(f"tag expression {expression!r} names no tag")
    return tags


def matches(tags: frozenset[str] | None, message: MessageView) -> bool:
    return tags is None or (message.tags is not None and message.tags in tags)
