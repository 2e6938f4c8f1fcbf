"""Messages as rows of the source's schema: Python tuples, or Arrow record batches (3x cheaper in Spark).

``to_arrow`` takes the Arrow schema Spark derived from the StructType (``to_arrow_schema``) because
Spark rejects a batch whose schema differs in any detail (nullability, timestamp unit or zone).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from txmq.common import properties as props
from txmq.common.message import MessageView

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
