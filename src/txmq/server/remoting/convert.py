"""Wire <-> broker types: send headers and properties to ``Message``, ``MessageView`` to message records.

4.x clients carry every message field as a property (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``DELAY``,
``__SHARDINGKEY``, ``TRAN_MSG``); txmq's ``Message`` has them as fields, and the broker writes them back
as the same properties, so a record reads the same through either front door.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence

from txmq.broker.records import split_host
from txmq.common import errors
from txmq.common import properties as props
from txmq.common.message import LeanMessage, Message, MessageView, SysFlag
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.protocol.remoting.message_codec import PulledRecord, WireMessage, body_crc, ipv4_bytes
from txmq.storage import codec
from txmq.storage.codec import RawRecord

_CONSUMED = frozenset(
    {
        props.TAGS,
        props.KEYS,
        props.UNIQ_KEY,
        props.DELAY,
        props.SHARDING_KEY,
        props.TRAN_MSG,
        props.TIMER_DELIVER_MS,
    }
)
# ali-ons spells the sharding key differently; its queue choice already follows the key.
_ALI_SHARDING_KEY = "__SHARDING_KEY"


def to_message(topic: str, body: bytes, properties: Mapping[str, str], sys_flag: int) -> Message:
    """A ``Message`` from a 4.x send: message fields out of the properties, the rest passed along."""
    delay = properties.get(props.DELAY, "")
    try:
        delay_level = int(delay) if delay else None
    except ValueError:
        raise errors.InvalidDeliveryTime(f"DELAY property {delay[:16]!r} is not a delay level") from None
    transactional = properties.get(props.TRAN_MSG, "").lower() == "true" or bool(
        sys_flag & TRANSACTION_PREPARED_TYPE
    )
    deliver = properties.get(props.TIMER_DELIVER_MS, "")
    if deliver and not deliver.isdecimal():
        raise errors.InvalidDeliveryTime(f"TIMER_DELIVER_MS {deliver[:20]!r} is not epoch milliseconds")
    delivery_ms = int(deliver) if deliver else None
    group = properties.get(props.SHARDING_KEY) or properties.get(_ALI_SHARDING_KEY) or None
    if group is not None and (transactional or delay_level or delivery_ms is not None):
        group = None  # 4.x allows an ordered-by-key delay or transaction; the key only picked the queue
    keys = properties.get(props.KEYS, "")
    return Message(
        topic=topic,
        body=body,
        tags=properties.get(props.TAGS) or None,
        keys=tuple(k for k in keys.split(props.KEY_SEPARATOR) if k),
        properties={k: v for k, v in properties.items() if k not in _CONSUMED and k != _ALI_SHARDING_KEY},
        message_group=group,
        delay_level=delay_level or None,
        delivery_timestamp_ms=delivery_ms if not delay_level else None,
        message_id=properties.get(props.UNIQ_KEY) or None,
        transactional=transactional,
    )


_SYSTEM_KEYS = props.SYSTEM_KEYS
_new_tuple = tuple.__new__  # a NamedTuple built without its Python-level __new__ (an interpreted call)


def to_lean(body: bytes, properties: dict[str, str], sys_flag: int) -> LeanMessage | None:
    """The send lane's message for a NORMAL or FIFO 4.x send, or None when :func:`to_message` must
    judge it (a delay, a transaction, check immunity): the same fields ``to_message`` would give."""
    if sys_flag & TRANSACTION_PREPARED_TYPE:
        return None
    # the properties that send a 4.x message down the general path (delay, transaction, check
    # immunity, the ali-ons sharding key): one dict lookup each
    if (
        props.DELAY in properties
        or props.TRAN_MSG in properties
        or props.TIMER_DELIVER_MS in properties
        or props.CHECK_IMMUNITY_TIME_IN_SECONDS in properties
        or _ALI_SHARDING_KEY in properties
    ):
        return None
    keys = properties.get(props.KEYS, "")
    lean: LeanMessage = _new_tuple(
        LeanMessage,
        (
            body if type(body) is bytes else bytes(body),
            {k: v for k, v in properties.items() if k not in _SYSTEM_KEYS},
            properties.get(props.TAGS) or None,
            tuple([k for k in keys.split(props.KEY_SEPARATOR) if k]) if keys else (),
            properties.get(props.UNIQ_KEY) or None,
            properties.get(props.SHARDING_KEY) or None,
        ),
    )
    return lean


@functools.lru_cache(maxsize=1024)
def _host(host_port: str) -> tuple[str, int]:
    """``"ip:port"`` -> ``(ip, port)``; cached: a broker has one store host and few born hosts."""
    return split_host(host_port or "127.0.0.1:0")


def to_wire(view: MessageView, *, topic: str | None = None, sys_flag: int = 0) -> WireMessage:
    """The message record a 4.x consumer decodes (V1, IPv4 hosts); the stored property bytes are
    passed through when the view carries them."""
    raw = view.raw_properties
    return WireMessage(
        topic=topic or view.topic,
        body=view.body,
        properties=dict(view.properties) if raw is None else {},
        properties_raw=raw,
        queue_id=view.queue_id,
        queue_offset=view.queue_offset,
        commit_log_offset=view.commit_log_offset,
        sys_flag=sys_flag,
        born_timestamp=view.born_timestamp_ms,
        born_host=_host(view.born_host),
        store_timestamp=view.store_timestamp_ms,
        store_host=_host(view.store_host),
        reconsume_times=view.reconsume_times,
        body_crc=body_crc(view.body),
    )


def check_wire(view: MessageView, transaction_id: str, producer_group: str) -> WireMessage:
    """The half message of a CHECK_TRANSACTION_STATE: what 4.x producers need to find their producer."""
    properties = dict(view.properties)
    properties.setdefault(props.PRODUCER_GROUP, producer_group)
    properties[props.TRAN_MSG] = "true"
    properties[props.TRANSACTION_ID] = transaction_id
    if view.message_id:
        properties.setdefault(props.UNIQ_KEY, view.message_id)
    return dataclasses.replace(
        to_wire(view, sys_flag=SysFlag.TRANSACTION_PREPARED), properties=properties, properties_raw=None
    )


_NAMES_MAX = 4096
# a record's names part (topic, born host, store host as stored) -> (topic, born, store as the wire
# carries them), or None when a host is not UTF-8; a broker sees few distinct names parts
_wire_names: dict[bytes, tuple[bytes, tuple[bytes, int], tuple[bytes, int]] | None] = {}
_RECONSUME_KEY = (props.RECONSUME_TIME + props.NAME_VALUE_SEPARATOR).encode()


def _names_for_wire(names: bytes) -> tuple[bytes, tuple[bytes, int], tuple[bytes, int]] | None:
    topic, born_host, store_host = codec.names_of(names)
    try:
        wire = (topic, _wire_host(born_host), _wire_host(store_host))
    except UnicodeDecodeError:
        wire = None
    if len(_wire_names) < _NAMES_MAX:
        _wire_names[names] = wire
    return wire


def _wire_host(raw: bytes) -> tuple[bytes, int]:
    """A stored ``ip:port`` host as a record's IPv4 bytes and port, as ``to_wire`` makes it. Raises
    UnicodeDecodeError on bytes that are not UTF-8 (which the general read rejects)."""
    host, port = _host(str(raw, "utf-8"))
    return ipv4_bytes(host), port


def pulled(
    records: Sequence[RawRecord], topic: str, general: Callable[[int], bytes]
) -> list[PulledRecord | bytes]:
    """The fields ``encode_pulled`` writes for each raw record, as ``to_wire(to_view(record))`` has
    them. A record the lean path does not cover byte for byte (a RECONSUME_TIME property, which
    overrides the header's count; a stored topic other than the pulled one; hosts not UTF-8) is
    encoded by ``general(physical_offset)``, the general path, instead."""
    topic_bytes = topic.encode("utf-8")
    cache = _wire_names
    result: list[PulledRecord | bytes] = []
    append = result.append
    for (_, queue_id, _, queue_offset, physical_offset, _, born_ts, store_ts, _, reconsume, _, names,
         properties, body) in records:  # fmt: skip
        wire = cache[names] if names in cache else _names_for_wire(names)
        if wire is None or wire[0] != topic_bytes or _RECONSUME_KEY in properties:
            append(general(physical_offset))
            continue
        born, store = wire[1], wire[2]
        append((body, properties, queue_id, queue_offset, physical_offset, born_ts, born[0], born[1],
                store_ts, store[0], store[1], reconsume))  # fmt: skip
    return result
