"""Pure conversions between the SDK's message types and the remoting protocol's (no I/O).

4.x carries every message field as a property (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``DELAY``,
``__SHARDINGKEY``, ``TRAN_MSG``, ``PGROUP``); a delivered message from a retry topic names its real
topic in ``RETRY_TOPIC``, which the view restores so listeners see the topic they subscribed to.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

from txmq.common import errors, limits, msgid
from txmq.common import properties as props
from txmq.common.message import Message, MessageType, MessageView
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.protocol.remoting.message_codec import (
    PulledFields,
    WireMessage,
    decode_messages,
    decode_pulled,
    encode_batch_encoded,
)


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


_SYSTEM_KEYS: Final = props.SYSTEM_KEYS
_PROPERTY_COUNT_MAX: Final = limits.property_count_max
_PROPERTIES_BYTES_MAX: Final = limits.properties_bytes_max


def properties_text(message: Message, message_id: str, producer_group: str) -> str:
    """``props.encode(message_properties(message, message_id, producer_group))`` as text, rendered as
    one ``name\x01value\x02...`` join with no dict and no per-pair or whole encode; the same pairs in
    the same order (user properties but system keys, then the system keys ``message_properties``
    sets, each in its place). Anything unusual (a separator or empty name, non-ASCII, over a limit)
    goes the general way, which gives the same text or raises the same error
    (tests/property/test_single_props_text.py)."""
    parts: list[str] = []
    user = message.properties
    if user:
        for name, value in user.items():
            if name not in _SYSTEM_KEYS:
                if not name or type(value) is not str:
                    return _properties_text_general(message, message_id, producer_group)
                parts.append(f"{name}\x01{value}\x02")
    tags = message.tags
    if tags:
        parts.append(f"TAGS\x01{tags}\x02")
    keys = message.keys
    if keys:
        parts.append(f"KEYS\x01{' '.join(keys)}\x02")
    parts.append(f"UNIQ_KEY\x01{message_id}\x02")
    group = message.message_group
    if group is not None:
        parts.append(f"__SHARDINGKEY\x01{group}\x02")
    if message.delay_level:
        parts.append(f"DELAY\x01{message.delay_level}\x02")
    deliver = message.delivery_timestamp_ms
    if deliver is not None:
        parts.append(f"TIMER_DELIVER_MS\x01{deliver}\x02")
    if message.transactional:
        parts.append("TRAN_MSG\x01true\x02")
        immunity = message.check_immunity_s
        if immunity is not None:
            parts.append(f"CHECK_IMMUNITY_TIME_IN_SECONDS\x01{immunity}\x02")
    if producer_group:
        parts.append(f"PGROUP\x01{producer_group}\x02")
    text = "".join(parts)
    count = len(parts)
    if (
        count <= _PROPERTY_COUNT_MAX
        and len(text) <= _PROPERTIES_BYTES_MAX
        and text.isascii()
        and text.count("\x01") == count
        and text.count("\x02") == count
    ):
        return text
    return _properties_text_general(message, message_id, producer_group)


def _properties_text_general(message: Message, message_id: str, producer_group: str) -> str:
    return props.encode(message_properties(message, message_id, producer_group)).decode("utf-8")


if (props.TAGS, props.KEYS, props.KEY_SEPARATOR, props.UNIQ_KEY, props.SHARDING_KEY, props.DELAY) != (
    "TAGS", "KEYS", " ", "UNIQ_KEY", "__SHARDINGKEY", "DELAY",
) or (props.TIMER_DELIVER_MS, props.TRAN_MSG, props.CHECK_IMMUNITY_TIME_IN_SECONDS, props.PRODUCER_GROUP) != (
    "TIMER_DELIVER_MS", "TRAN_MSG", "CHECK_IMMUNITY_TIME_IN_SECONDS", "PGROUP",
) or (props.NAME_VALUE_SEPARATOR, props.PROPERTY_SEPARATOR) != ("\x01", "\x02"):  # fmt: skip
    raise AssertionError("property names changed: update properties_text")


PLAIN_PROPERTIES_MAX: Final = min(limits.properties_bytes_max, 0x7FFF)  # props.encode's and a batch entry's
_UNIQ_KEY_PAIR: Final = f"{props.UNIQ_KEY}{props.NAME_VALUE_SEPARATOR}".encode()


_ENTRY_HEAD: Final = struct.Struct(">iiiii")  # message_codec's entry head: total, magic, crc, flag, body
_INT32_MAX: Final = 0x7FFFFFFF
# a plain entry's properties length (2 bytes) and its id pair's name, by properties length (ids of one
# producer are all as long: one entry serves a whole batch)
_PLAIN_PREFIXES: dict[int, bytes] = {}


def batch_body(messages: Sequence[Message], ids: Sequence[str], producer_group: str) -> bytes:
    """The SEND_BATCH_MESSAGE body of ``messages`` (``ids``: their message ids): byte for byte
    ``encode_batch([BatchMessage(bytes(m.body), message_properties(m, i, producer_group)) ...])``
    (tests/property/test_batch_body.py).

    A batch of only plain messages without tags or keys (what ``send_batch`` of bare messages sends)
    is laid out entry by entry in one pass (``_plain_batch_body``); any other batch, or one that pass
    declines, takes :func:`batch_body_general`, the reference, which gives the same bytes or errors."""
    if len(messages) == len(ids):
        id_tail = plain_id_tail(producer_group)
        if id_tail is not None:
            body = _plain_batch_body(messages, ids, id_tail)
            if body is not None:
                return body
    return batch_body_general(messages, ids, producer_group)


def plain_id_tail(producer_group: str) -> bytes | None:
    """What follows a plain message's id in its properties: the pair's end and the producer group's
    pair; None when the group holds a separator or is not UTF-8 (the general way judges it)."""
    if not producer_group:
        return b"\x02"
    if props.NAME_VALUE_SEPARATOR in producer_group or props.PROPERTY_SEPARATOR in producer_group:
        return None
    try:
        return f"\x02{props.PRODUCER_GROUP}\x01{producer_group}\x02".encode()
    except UnicodeEncodeError:
        return None


def _plain_batch_body(messages: Sequence[Message], ids: Sequence[str], id_tail: bytes) -> bytes | None:
    """``batch_body_general`` of a batch whose every message is plain (no user properties, tags, keys,
    message group, delay, delivery time or transaction; a ``bytes`` body) with an ASCII id free of
    separators: each entry's head, body, properties length and ``UNIQ_KEY`` pair, id and ``id_tail``
    joined once, no entry tuples and no properties bytes built per message. None (nothing raised) at
    the first message that is not so, or an entry too long to lay out, for the general way."""
    parts: list[bytes] = []
    pack = _ENTRY_HEAD.pack
    prefixes = _PLAIN_PREFIXES
    fixed = len(_UNIQ_KEY_PAIR) + len(id_tail)
    last_body_len = last_properties_len = -1
    head = prefix = b""
    for message, message_id in zip(messages, ids, strict=True):  # lengths checked by the caller
        raw = message.body
        if (
            type(raw) is not bytes
            or message.properties
            or message.tags
            or message.keys
            or message.message_group is not None
            or message.delay_level
            or message.delivery_timestamp_ms is not None
            or message.transactional
            or not message_id.isascii()
            or props.NAME_VALUE_SEPARATOR in message_id
            or props.PROPERTY_SEPARATOR in message_id
        ):
            return None
        body = raw
        body_len = len(body)
        properties_len = fixed + len(message_id)
        if body_len != last_body_len or properties_len != last_properties_len:
            # a batch's entries are mostly alike (one body size, ids of one length): head and
            # prefix made again only when a length changes, not packed per message
            total = _ENTRY_HEAD.size + body_len + 2 + properties_len
            if properties_len > PLAIN_PROPERTIES_MAX or total > _INT32_MAX:
                return None
            head = pack(total, 0, 0, 0, body_len)
            known = prefixes.get(properties_len)
            if known is None:
                known = properties_len.to_bytes(2, "big") + _UNIQ_KEY_PAIR
                if len(prefixes) < 64:
                    prefixes[properties_len] = known
            prefix = known
            last_body_len, last_properties_len = body_len, properties_len
        parts.append(head)
        parts.append(body)
        parts.append(prefix)
        parts.append(message_id.encode("ascii"))
        parts.append(id_tail)
    return b"".join(parts)


def batch_body_general(messages: Sequence[Message], ids: Sequence[str], producer_group: str) -> bytes:
    """:func:`batch_body` of any batch, message by message (its reference).

    A plain message (no user properties, no delay, not transactional) has its properties laid out
    by one format, checked by two separator counts as ``props.encode`` checks them; any other
    message, or a plain one whose values hold a separator, is not UTF-8 or is too long, takes
    ``message_properties`` and ``props.encode``, which raise their errors in message order."""
    group_part = f"{props.PRODUCER_GROUP}\x01{producer_group}\x02" if producer_group else ""
    group_pairs = 1 if producer_group else 0
    # a plain message without tags, keys or group (the common batch): its properties are the id's
    # pair and the group's, bytes joined with no text built or counted, when the group holds no
    # separator and the id is ASCII without one (else the general lines below)
    id_tail: bytes | None = b"\x02"
    if producer_group:
        id_tail = None
        if (
            props.NAME_VALUE_SEPARATOR not in producer_group
            and props.PROPERTY_SEPARATOR not in producer_group
        ):
            try:
                id_tail = b"\x02" + group_part.encode("utf-8")
            except UnicodeEncodeError:
                id_tail = None
    entries: list[tuple[bytes, bytes]] = []
    for message, message_id in zip(messages, ids, strict=True):
        body = bytes(message.body)
        if (
            message.properties
            or message.delay_level
            or message.delivery_timestamp_ms is not None
            or message.transactional
        ):
            entries.append((body, props.encode(message_properties(message, message_id, producer_group))))
            continue
        tags = message.tags
        keys = message.keys
        group = message.message_group
        if (
            id_tail is not None
            and not tags
            and not keys
            and group is None
            and message_id.isascii()
            and props.NAME_VALUE_SEPARATOR not in message_id
            and props.PROPERTY_SEPARATOR not in message_id
        ):
            encoded = _UNIQ_KEY_PAIR + message_id.encode("ascii") + id_tail
            if len(encoded) <= PLAIN_PROPERTIES_MAX:
                entries.append((body, encoded))
                continue
        pairs = 1 + group_pairs
        text = f"{props.UNIQ_KEY}\x01{message_id}\x02"
        if keys:
            text = f"{props.KEYS}\x01{props.KEY_SEPARATOR.join(keys)}\x02{text}"
            pairs += 1
        if tags:
            text = f"{props.TAGS}\x01{tags}\x02{text}"
            pairs += 1
        if group is not None:
            text = f"{text}{props.SHARDING_KEY}\x01{group}\x02"
            pairs += 1
        text += group_part
        encoded = b""
        if text.count(props.NAME_VALUE_SEPARATOR) == pairs and text.count(props.PROPERTY_SEPARATOR) == pairs:
            try:
                encoded = text.encode("utf-8")
            except UnicodeEncodeError:
                encoded = b""
        if not encoded or len(encoded) > PLAIN_PROPERTIES_MAX:
            encoded = props.encode(message_properties(message, message_id, producer_group))
        entries.append((body, encoded))
    return encode_batch_encoded(entries)


def sys_flag_of(message: Message) -> int:
    return TRANSACTION_PREPARED_TYPE if message.transactional else 0


_MESSAGE_TYPES: dict[str, MessageType] = dict(MessageType.__members__)


def _message_type(decoded: Mapping[str, str]) -> MessageType:
    by_name = _MESSAGE_TYPES.get(decoded.get(props.MESSAGE_TYPE, ""))
    if by_name is not None:
        return by_name
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
    if props.RECONSUME_TIME in p and p[props.RECONSUME_TIME].isdecimal():
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
        delivery_timestamp_ms=int(deliver) if deliver.isdecimal() else None,
        message_type=_message_type(p),
        reconsume_times=reconsume,
        delivery_attempt=reconsume + 1,
        transaction_id=transaction_id or p.get(props.TRANSACTION_ID) or None,
        born_host=f"{wire.born_host[0]}:{wire.born_host[1]}",
        store_host=f"{wire.store_host[0]}:{wire.store_host[1]}",
        store_size=wire.store_size,
    )


def pulled_views(body: bytes, tags: frozenset[str] | None) -> list[MessageView]:
    """The views of a pull body's records that ``tags`` accepts: what ``view_of`` gives for each of
    ``decode_messages(body)``, without a ``WireMessage`` per record (the pull path's lean decode).
    With the C extension built, one C call (``_pullviews.views``) makes the views of a common body
    (plain IPv4 records, ASCII properties); it answers None for anything else and
    :func:`pulled_views_py`, the reference, runs."""
    views: list[MessageView] | None = None
    if _PULLVIEWS is not None:
        views = _PULLVIEWS(body)
    if views is None:
        views = pulled_views_py(body)
    if tags is None:
        return views
    return [v for v in views if v.tags is not None and v.tags in tags]


def pulled_views_py(body: bytes) -> list[MessageView]:
    """Every record's view (no tag filter), in Python: ``_pulled_view`` of each of ``decode_pulled``;
    records the lean decoder does not take (IPv6 hosts, anything malformed) go the general way,
    which raises the reference errors. ``_pullviews.views`` is held to it
    (tests/property/test_pullviews_native.py)."""
    try:
        fields = decode_pulled(body)
        return [_pulled_view(f) for f in fields]
    except (errors.TxmqError, ValueError):
        return [view_of(w) for w in decode_messages(body)]


def _pulled_view(fields: PulledFields) -> MessageView:
    (topic, body, raw, queue_id, queue_offset, commit_log_offset, born_ts, born, store_ts, store, reconsume,
     total) = fields  # fmt: skip
    p = props.decode(raw) if raw else {}
    get = p.get
    keys_text = get(props.KEYS)
    keys = tuple(filter(None, keys_text.split(props.KEY_SEPARATOR))) if keys_text else ()
    deliver = get(props.TIMER_DELIVER_MS, "")
    retried = get(props.RECONSUME_TIME)
    if retried is not None and retried.isdecimal():
        reconsume = int(retried)
    # positional, in MessageView's field order (a third cheaper than keywords for 21 fields); the
    # property tests compare every field with view_of's
    return MessageView(
        get(props.RETRY_TOPIC) or topic,
        body,
        get(props.UNIQ_KEY) or msgid.offset_message_id(store[0], store[1], commit_log_offset),
        queue_id,
        queue_offset,
        commit_log_offset,
        born_ts,
        store_ts,
        get(props.TAGS) or None,
        keys,
        p,
        get(props.SHARDING_KEY) or None,
        int(deliver) if deliver.isdecimal() else None,
        _message_type(p) if p else MessageType.NORMAL,
        reconsume,
        reconsume + 1,
        None,  # receipt_handle
        get(props.TRANSACTION_ID) or None,
        _host_text(born),
        _host_text(store),
        total,
    )


def _load_pullviews() -> Any:
    """``views`` of the C extension ``client/_pullviews.c`` (built beside the mypyc modules), bound to
    MessageView and this module's helpers; None when it is not built, ``TXMQ_PURE=1``, or the class
    is not laid out as it expects (then every body takes :func:`pulled_views_py`)."""
    try:
        module = importlib.import_module("txmq.client._pullviews")
        names = tuple(f.name for f in dataclasses.fields(MessageView))
        module.setup(MessageView, names, MessageType.NORMAL, _message_type, msgid.offset_message_id)
    except (ImportError, TypeError):
        return None
    return module.views


@functools.lru_cache(maxsize=256)
def _host_text(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


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


_PULLVIEWS: Final[Any] = _load_pullviews()
