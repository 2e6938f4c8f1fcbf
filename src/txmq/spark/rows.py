"""Messages as rows of the source's schema: Python tuples, or Arrow record batches (3x cheaper in Spark).

``to_arrow`` takes the Arrow schema Spark derived from the StructType (``to_arrow_schema``) because
Spark rejects a batch whose schema differs in any detail (nullability, timestamp unit or zone).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from txmq.client._remoting_convert import pulled_views
from txmq.common import errors, msgid
from txmq.common import properties as props
from txmq.common.message import MessageView
from txmq.protocol.remoting.message_codec import PulledFields, decode_pulled
from txmq.spark import schema

_UTC = dt.UTC


def _keys(m: MessageView) -> str | None:
    return " ".join(m.keys) if m.keys else None


def _stamp(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=_UTC)


def to_tuple(m: MessageView) -> tuple[Any, ...]:
    """One row, in ``schema.COLUMNS`` order."""
    return (
        m.topic, m.queue_id, m.queue_offset, m.message_id, m.tags, _keys(m), bytes(m.body),
        props.user_properties(m.properties), _stamp(m.born_timestamp_ms), _stamp(m.store_timestamp_ms),
        _stamp(m.delivery_timestamp_ms), m.message_group, m.transaction_id,
    )  # fmt: skip


def to_arrow(messages: Sequence[MessageView], arrow_schema: Any) -> Any:
    """A ``pyarrow.RecordBatch`` of ``messages`` with exactly ``arrow_schema``."""
    import pyarrow as pa

    def micros(ms: int | None) -> int | None:
        return None if ms is None else ms * 1000

    columns = [
        [m.topic for m in messages],
        [m.queue_id for m in messages],
        [m.queue_offset for m in messages],
        [m.message_id for m in messages],
        [m.tags for m in messages],
        [_keys(m) for m in messages],
        [bytes(m.body) for m in messages],
        [list(props.user_properties(m.properties).items()) for m in messages],
        [micros(m.born_timestamp_ms) for m in messages],
        [micros(m.store_timestamp_ms) for m in messages],
        [micros(m.delivery_timestamp_ms) for m in messages],
        [m.message_group for m in messages],
        [m.transaction_id for m in messages],
    ]
    arrays = [pa.array(col, type=f.type) for col, f in zip(columns, arrow_schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


# The rows of a batch column by column, in ``schema.COLUMNS`` order; timestamps as epoch milliseconds.
Columns = Sequence[Sequence[Any]]
_WIDTH = len(schema.COLUMNS)
_STAMPS = (8, 9, 10)  # born, store, delivery


def _columns_of_views(messages: Sequence[MessageView]) -> Columns:
    return [
        [m.topic for m in messages],
        [m.queue_id for m in messages],
        [m.queue_offset for m in messages],
        [m.message_id for m in messages],
        [m.tags for m in messages],
        [_keys(m) for m in messages],
        [bytes(m.body) for m in messages],
        [props.user_properties(m.properties) for m in messages],
        [m.born_timestamp_ms for m in messages],
        [m.store_timestamp_ms for m in messages],
        [m.delivery_timestamp_ms for m in messages],
        [m.message_group for m in messages],
        [m.transaction_id for m in messages],
    ]


def columns_of_views(messages: Sequence[MessageView], end: int) -> Columns:
    """The columns of the ``messages`` below offset ``end`` (the general path: gRPC, odd records)."""
    return _columns_of_views([m for m in messages if m.queue_offset < end])


_SYSTEM_KEYS = props.SYSTEM_KEYS


def columns_of_pulled(body: bytes, tags: frozenset[str] | None, end: int) -> Columns:
    """The columns of a pull body's records below offset ``end`` that ``tags`` accepts: what
    ``to_tuple`` gives for each of ``pulled_views(body, tags)``, straight from ``decode_pulled``'s
    tuples (no ``MessageView``, each record's properties decoded once). A body the lean decoder does
    not take goes through ``pulled_views``, which raises the reference errors."""
    try:
        return _lean_columns(decode_pulled(body), tags, end)
    except (errors.TxmqError, ValueError):
        return columns_of_views(pulled_views(body, tags), end)


def _lean_columns(records: list[PulledFields], tags: frozenset[str] | None, end: int) -> Columns:
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    decode, system, key_sep, id_of = props.decode, _SYSTEM_KEYS, props.KEY_SEPARATOR, msgid.offset_message_id
    tags_key, keys_key, deliver_key, retry_key, uniq_key = (
        props.TAGS, props.KEYS, props.TIMER_DELIVER_MS, props.RETRY_TOPIC, props.UNIQ_KEY,
    )  # fmt: skip
    group_key, txid_key = props.SHARDING_KEY, props.TRANSACTION_ID
    for topic, body, raw, queue_id, queue_offset, phys, born_ts, _, store_ts, store, _, _ in records:
        if raw:
            p = decode(raw)  # before the end check: a bad record fails the batch as in pulled_views
            get = p.get
            tag = get(tags_key) or None
            if queue_offset >= end or (tags is not None and (tag is None or tag not in tags)):
                continue
            keys_text = get(keys_key)
            keys = key_sep.join(filter(None, keys_text.split(key_sep))) if keys_text else None
            deliver = get(deliver_key, "")
            append((
                get(retry_key) or topic, queue_id, queue_offset,
                get(uniq_key) or id_of(store[0], store[1], phys), tag, keys or None, body,
                {k: v for k, v in p.items() if k not in system}, born_ts, store_ts,
                int(deliver) if deliver.isdecimal() else None, get(group_key) or None, get(txid_key) or None,
            ))  # fmt: skip
        elif queue_offset < end and tags is None:
            append((topic, queue_id, queue_offset, id_of(store[0], store[1], phys), None, None, body, {},
                    born_ts, store_ts, None, None, None))  # fmt: skip
    if not rows:
        return [[] for _ in range(_WIDTH)]
    return list(zip(*rows, strict=True))


def tuples_of(columns: Columns) -> list[tuple[Any, ...]]:
    """The rows of ``columns`` as tuples, exactly as ``to_tuple`` builds them."""
    cols = list(columns)
    for i in _STAMPS:
        cols[i] = [_stamp(ms) for ms in cols[i]]
    return list(zip(*cols, strict=True))


def arrow_of(columns: Columns, arrow_schema: Any) -> Any:
    """A ``pyarrow.RecordBatch`` of ``columns`` with exactly ``arrow_schema`` (as ``to_arrow``)."""
    import pyarrow as pa

    cols = list(columns)
    for i in _STAMPS:
        cols[i] = [None if ms is None else ms * 1000 for ms in cols[i]]
    arrays = [pa.array(col, type=f.type) for col, f in zip(cols, arrow_schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def record_starts(body: bytes, fixed: int) -> list[int] | None:
    """Where each record of a pull body starts (the chain of 4-byte big-endian total sizes), or None
    when a size is below ``fixed`` or the chain does not end exactly at the body's end. A compiled
    loop: ``arrow_pulled`` walks every pulled record with it."""
    starts: list[int] = []
    size = len(body)
    pos = 0
    while pos < size:
        if pos + 4 > size:
            return None
        total = (body[pos] << 24) | (body[pos + 1] << 16) | (body[pos + 2] << 8) | body[pos + 3]
        if total < fixed or total >= 0x80000000:
            return None
        starts.append(pos)
        pos += total
    return starts if pos == size else None


def arrow_of_pulled(body: bytes, tags: frozenset[str] | None, end: int, arrow_schema: Any) -> Any:
    """``arrow_of(columns_of_pulled(body, tags, end), arrow_schema)``, or None when no row is left:
    built column by column (``arrow_pulled.batch_of_pulled``) unless the body holds something only
    the reference path covers."""
    from txmq.spark.arrow_pulled import Unsupported, batch_of_pulled

    try:
        return batch_of_pulled(body, tags, end, arrow_schema)
    except Unsupported:
        columns = columns_of_pulled(body, tags, end)
        return arrow_of(columns, arrow_schema) if columns[0] else None
