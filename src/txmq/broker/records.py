"""Stored records <-> messages: which properties carry which message field.

The broker stores every message field that is not a fixed record field as a RocketMQ property
(``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``__SHARDINGKEY``, ``TIMER_DELIVER_MS`` ...), so a message written
through gRPC reads back through remoting unchanged and the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from txmq.common import msgid
from txmq.common import properties as props
from txmq.common.message import MessageType, MessageView
from txmq.storage.api import StoredRecord


def index_keys(topic: str, properties_bytes: bytes) -> Sequence[str]:
    """Keys the store indexes for queries: every KEYS entry and the client message id (UNIQ_KEY)."""
    try:
        decoded = props.decode(properties_bytes)
    except Exception:  # noqa: BLE001 - a record with bad properties is simply not indexed
        return ()
    return keys_of(decoded)


def keys_of(decoded: Mapping[str, str]) -> tuple[str, ...]:
    """:func:`index_keys` of decoded properties (a writer that has them passes ``PutRequest.index_keys``)."""
    keys = [k for k in decoded.get(props.KEYS, "").split(props.KEY_SEPARATOR) if k]
    unique = decoded.get(props.UNIQ_KEY)
    if unique:
        keys.append(unique)
    return tuple(keys)


def split_host(host_port: str) -> tuple[str, int]:
    host, _, port = host_port.rpartition(":")
    try:
        return host or host_port, int(port)
    except ValueError:
        return host_port, 0


def message_id_of(record: StoredRecord, decoded: Mapping[str, str]) -> str:
    unique = decoded.get(props.UNIQ_KEY)
    if unique:
        return unique
    host, port = split_host(record.store_host)
    return msgid.offset_message_id(host, port, record.physical_offset)


def offset_message_id(record: StoredRecord) -> str:
    host, port = split_host(record.store_host)
    return msgid.offset_message_id(host, port, record.physical_offset)


_TYPES_BY_NAME: dict[str, MessageType] = dict(MessageType.__members__)  # Enum.__members__ copies per call


def message_type_of(decoded: Mapping[str, str]) -> MessageType:
    name = decoded.get(props.MESSAGE_TYPE)
    if name is not None and name in _TYPES_BY_NAME:
        return _TYPES_BY_NAME[name]
    if decoded.get(props.SHARDING_KEY):
        return MessageType.FIFO
    if decoded.get(props.TIMER_DELIVER_MS) or decoded.get(props.DELAY):
        return MessageType.DELAY
    if decoded.get(props.TRAN_MSG) == "true":
        return MessageType.TRANSACTION
    return MessageType.NORMAL


def to_view(
    record: StoredRecord,
    *,
    decoded: Mapping[str, str] | None = None,
    delivery_attempt: int | None = None,
    receipt_handle: str | None = None,
    raw_properties: bytes | None = None,
) -> MessageView:
    """A consumer's view of a stored record. ``raw_properties``: the bytes ``decoded`` came from, if
    it is the record's own properties unchanged (decoded here, it is)."""
    if decoded is None:
        decoded = props.decode(record.properties)
        raw_properties = record.properties
    keys_text = decoded.get(props.KEYS)  # most messages have none: skip the split and the generator
    keys = tuple(k for k in keys_text.split(props.KEY_SEPARATOR) if k) if keys_text else ()
    deliver = decoded.get(props.TIMER_DELIVER_MS)
    reconsume = int(decoded.get(props.RECONSUME_TIME, record.reconsume_times) or 0)
    return MessageView(
        topic=decoded.get(props.RETRY_TOPIC) or record.topic,
        body=record.body,
        message_id=message_id_of(record, decoded),
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        commit_log_offset=record.physical_offset,
        born_timestamp_ms=record.born_timestamp_ms,
        store_timestamp_ms=record.store_timestamp_ms,
        tags=decoded.get(props.TAGS) or None,
        keys=keys,
        properties=decoded,
        message_group=decoded.get(props.SHARDING_KEY) or None,
        delivery_timestamp_ms=int(deliver) if deliver and deliver.isdecimal() else None,
        message_type=message_type_of(decoded),
        reconsume_times=reconsume,
        delivery_attempt=delivery_attempt if delivery_attempt is not None else reconsume + 1,
        receipt_handle=receipt_handle,
        transaction_id=decoded.get(props.TRANSACTION_ID) or None,
        born_host=record.born_host,
        store_host=record.store_host,
        store_size=record.size,
        raw_properties=raw_properties,
    )
