"""RocketMQ message property keys and the ``key\\x01value\\x02`` properties encoding.

The encoding is RocketMQ's (``MessageDecoder.messageProperties2String``): each pair is
``name + '\\x01' + value + '\\x02'``. Names and values must not contain the two separators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from txmq.common import errors, limits

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

# MessageConst.java property keys (facts carried over from RocketMQ)
TAGS: Final = "TAGS"
KEYS: Final = "KEYS"
KEY_SEPARATOR: Final = " "
DELAY: Final = "DELAY"  # delay level, 4.x
UNIQ_KEY: Final = "UNIQ_KEY"  # the client's message id
TRAN_MSG: Final = "TRAN_MSG"
PRODUCER_GROUP: Final = "PGROUP"
REAL_TOPIC: Final = "REAL_TOPIC"
REAL_QUEUE_ID: Final = "REAL_QID"
RETRY_TOPIC: Final = "RETRY_TOPIC"
RECONSUME_TIME: Final = "RECONSUME_TIME"
MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
SHARDING_KEY: Final = "__SHARDINGKEY"  # FIFO message group
TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"  # delivery timestamp, 5.x
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
TRANSACTION_ID: Final = "__transactionId__"
TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
MIN_OFFSET: Final = "MIN_OFFSET"
MAX_OFFSET: Final = "MAX_OFFSET"
DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"
WAIT_STORE_MSG_OK: Final = "WAIT"
# txmq's own system properties (not sent by clients; prefixed to avoid clashes)
MESSAGE_TYPE: Final = "__TXMQ_TYPE"  # NORMAL / FIFO / DELAY / TRANSACTION
BORN_HOST: Final = "__TXMQ_BORN_HOST"
DELIVERY_ATTEMPT: Final = "__TXMQ_ATTEMPT"

SYSTEM_KEYS: Final = frozenset(
    {
        TAGS,
        KEYS,
        DELAY,
        UNIQ_KEY,
        TRAN_MSG,
        PRODUCER_GROUP,
        REAL_TOPIC,
        REAL_QUEUE_ID,
        RETRY_TOPIC,
        RECONSUME_TIME,
        MAX_RECONSUME_TIMES,
        ORIGIN_MESSAGE_ID,
        SHARDING_KEY,
        TIMER_DELIVER_MS,
        TIMER_DELAY_SEC,
        TIMER_DELAY_MS,
        CHECK_IMMUNITY_TIME_IN_SECONDS,
        TRANSACTION_ID,
        TRANSACTION_CHECK_TIMES,
        MIN_OFFSET,
        MAX_OFFSET,
        DLQ_ORIGIN_TOPIC,
        DLQ_ORIGIN_MESSAGE_ID,
        WAIT_STORE_MSG_OK,
        MESSAGE_TYPE,
        BORN_HOST,
        DELIVERY_ATTEMPT,
    }
)


def encode(properties: Mapping[str, str]) -> bytes:
    """Encode properties; raises ``InvalidProperty`` / ``PropertiesTooLarge`` on bad input."""
    count = len(properties)
    if count > limits.property_count_max:
        raise errors.InvalidProperty(f"{count} properties, over the limit of {limits.property_count_max}")
    # One join, then two counts: every pair brings exactly one of each separator, so the counts equal
    # the pairs iff no name or value holds one. Anything odd goes to the checking loop for its error.
    sep, end = NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    text = "".join([name + sep + value + end for name, value in properties.items()])
    if text.count(sep) == count and text.count(end) == count and "" not in properties:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            if len(data) > limits.properties_bytes_max:
                raise errors.PropertiesTooLarge("properties", len(data), limits.properties_bytes_max)
            return data
    return _encode_checked(properties)


def _encode_checked(properties: Mapping[str, str]) -> bytes:
    """:func:`encode` item by item, naming the first bad entry."""
    parts: list[str] = []
    for name, value in properties.items():
        if not name:
            raise errors.InvalidProperty("a property name must not be empty")
        for text in (name, value):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise errors.InvalidProperty(
                    f"property {name!r} contains a reserved separator character (\\x01 or \\x02)"
                )
        parts.append(name + NAME_VALUE_SEPARATOR + value + PROPERTY_SEPARATOR)
    try:
        data = "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise errors.InvalidProperty(f"properties are not valid UTF-8: {exc}") from None
    if len(data) > limits.properties_bytes_max:
        raise errors.PropertiesTooLarge("properties", len(data), limits.properties_bytes_max)
    return data


def decode(data: bytes) -> dict[str, str]:
    """Decode properties; raises ``InvalidProperty`` on bytes that are not UTF-8 or not pairs."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.InvalidProperty(f"properties are not valid UTF-8: {exc}") from None
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if not sep:
            raise errors.InvalidProperty(f"malformed property entry {item[:64]!r}")
        result[name] = value
    return result


def user_properties(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in properties.items() if k not in SYSTEM_KEYS}
