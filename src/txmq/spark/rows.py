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
Columns = list[list[Any]]
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
    topics: list[Any] = []
    queue_ids: list[Any] = []
    offsets: list[Any] = []
    ids: list[Any] = []
    tag_col: list[Any] = []
    keys_col: list[Any] = []
    bodies: list[Any] = []
    user: list[Any] = []
    born_col: list[Any] = []
    store_col: list[Any] = []
    deliver_col: list[Any] = []
    groups: list[Any] = []
    txids: list[Any] = []
    decode, system, key_sep = props.decode, _SYSTEM_KEYS, props.KEY_SEPARATOR
    id_of = msgid.offset_message_id
    for topic, body, raw, queue_id, queue_offset, phys, born_ts, _, store_ts, store, _, _ in records:
        if raw:
            p = decode(raw)  # before the end check: a bad record fails the batch as in pulled_views
            get = p.get
            tag = get(props.TAGS) or None
            if queue_offset >= end or (tags is not None and (tag is None or tag not in tags)):
                continue
            keys_text = get(props.KEYS)
            deliver = get(props.TIMER_DELIVER_MS, "")
            topics.append(get(props.RETRY_TOPIC) or topic)
            ids.append(get(props.UNIQ_KEY) or id_of(store[0], store[1], phys))
            tag_col.append(tag)
            keys = key_sep.join(filter(None, keys_text.split(key_sep))) if keys_text else None
            keys_col.append(keys or None)
            user.append({k: v for k, v in p.items() if k not in system})
            deliver_col.append(int(deliver) if deliver.isdigit() else None)
            groups.append(get(props.SHARDING_KEY) or None)
            txids.append(get(props.TRANSACTION_ID) or None)
        else:
            if queue_offset >= end or tags is not None:
                continue
            topics.append(topic)
            ids.append(id_of(store[0], store[1], phys))
            tag_col.append(None)
            keys_col.append(None)
            user.append({})
            deliver_col.append(None)
            groups.append(None)
            txids.append(None)
        queue_ids.append(queue_id)
        offsets.append(queue_offset)
        bodies.append(body)
        born_col.append(born_ts)
        store_col.append(store_ts)
    return [topics, queue_ids, offsets, ids, tag_col, keys_col, bodies, user, born_col, store_col,
            deliver_col, groups, txids]  # fmt: skip


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
    cols[7] = [list(d.items()) for d in cols[7]]
    for i in _STAMPS:
        cols[i] = [None if ms is None else ms * 1000 for ms in cols[i]]
    arrays = [pa.array(col, type=f.type) for col, f in zip(cols, arrow_schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
