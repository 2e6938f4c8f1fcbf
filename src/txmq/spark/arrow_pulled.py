"""A pull body straight to one Arrow record batch, column by column (numpy + pyarrow compute).

The Arrow twin of ``rows.columns_of_pulled`` + ``rows.arrow_of`` without a Python object per record:

- the record chain is walked once (one 4-byte read per record) for the record starts; every fixed
  field of every record comes from one gather of the 88-byte headers viewed through a big-endian
  structured dtype;
- the body and properties columns are the records' byte ranges taken out of the pull body in one
  ``take``: the ranges and the gaps between them are the values of one binary array over the body
  buffer (offsets ``start0 end0 start1 end1 ...``), so taking every second value copies just the ranges;
- properties are split on their bytes with numpy (the positions of every ``\\x02`` and ``\\x01`` of
  the batch's properties texts give every entry's name and value range and row), names and values
  taken out like the bodies, the names dictionary-encoded, and each system property's column taken
  by index; the user properties become the map column from flat key/value arrays and per-row offsets.

Anything it does not cover exactly (IPv6 hosts, unknown magic codes, bounds that do not check out,
mixed topics, invalid UTF-8, a malformed or repeated property, odd keys, delivery times or retry
topics) makes ``batch_of_pulled`` raise ``Unsupported``, and the caller takes the reference path
(``columns_of_pulled``), which also raises the reference errors. ``tests/spark/test_arrow_pulled.py``
holds both to equal batches.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from txmq.common import msgid
from txmq.common import properties as props
from txmq.protocol.remoting.message_codec import _V6_FLAGS, MAGIC_V1, MAGIC_V2
from txmq.spark.rows import record_starts

# The V4 record header (``message_codec._V4_FIXED``, 88 bytes) as a numpy record.
_HEADER: Final = np.dtype(
    [
        ("total", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
        ("queue_offset", ">i8"), ("phys", ">i8"), ("sys_flag", ">i4"), ("born_ts", ">i8"),
        ("born_ip", "V4"), ("born_port", ">i4"), ("store_ts", ">i8"), ("store_ip", "V4"),
        ("store_port", ">i4"), ("reconsume", ">i4"), ("prepared", ">i8"), ("body_len", ">i4"),
    ]
)  # fmt: skip
_FIXED: Final = _HEADER.itemsize
assert _FIXED == 88
_STAMP_MAX: Final = (2**63 - 1) // 1000  # milliseconds whose microseconds fit an int64
_SYSTEM: Final = props.SYSTEM_KEYS


class Unsupported(Exception):
    """The body holds something only the reference path covers exactly."""


def _ranges(buffer: Any, starts: np.ndarray, ends: np.ndarray, kind: Any) -> Any:
    """The byte ranges ``[starts[i], ends[i])`` of ``buffer`` (ascending, not overlapping) as one array."""
    n = len(starts)
    offsets = np.empty(2 * n + 1, dtype=np.int32)
    offsets[0:-1:2] = starts
    offsets[1::2] = ends
    offsets[-1] = ends[-1]
    spread = pa.Array.from_buffers(kind, 2 * n, [None, pa.py_buffer(offsets), buffer])
    return spread.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))


def batch_of_pulled(body: Any, tags: frozenset[str] | None, end: int, arrow_schema: Any) -> Any:
    """The rows of a pull body's records below offset ``end`` that ``tags`` accepts, as one
    ``pyarrow.RecordBatch`` with exactly ``arrow_schema`` (the batch ``arrow_of(columns_of_pulled(...))``
    gives); raises ``Unsupported`` for a body only the reference path covers."""
    size = len(body)
    if not size:
        raise Unsupported
    found = record_starts(body, _FIXED)
    if found is None:
        raise Unsupported
    starts = np.array(found, dtype=np.int64)
    n = len(starts)
    data = np.frombuffer(body, dtype=np.uint8)
    # every record's 88-byte header in one gather: rows of a sliding window over the body
    head = sliding_window_view(data, _FIXED)[starts].view(_HEADER).ravel()
    magic = head["magic"]
    rec_end = starts + head["total"]
    body_len = head["body_len"].astype(np.int64)
    body_start = starts + _FIXED
    body_end = body_start + body_len
    if (
        (head["sys_flag"] & _V6_FLAGS).any()
        or not ((magic == MAGIC_V1) | (magic == MAGIC_V2)).all()
        or (body_len < 0).any()
        or (body_end + 2 > rec_end).any()
    ):
        raise Unsupported
    v1 = magic == MAGIC_V1
    first = data[body_end].astype(np.int64)
    topic_len = np.where(v1, first, (first << 8) | data[body_end + 1])
    topic_start = body_end + np.where(v1, 1, 2)
    topic_end = topic_start + topic_len
    if (topic_end + 2 > rec_end).any():
        raise Unsupported
    props_start = topic_end + 2
    props_end = props_start + ((data[topic_end].astype(np.int64) << 8) | data[topic_end + 1])
    if (props_end > rec_end).any():
        raise Unsupported
    length, at = int(topic_len[0]), int(topic_start[0])
    first_topic = data[at : at + length]
    if (topic_len != length).any() or (data[topic_start[:, None] + np.arange(length)] != first_topic).any():
        raise Unsupported  # several topics in one body: the reference path
    try:
        topic = bytes(first_topic).decode("utf-8")
    except UnicodeDecodeError:
        raise Unsupported from None
    for name in ("born_ts", "store_ts"):
        if ((head[name] > _STAMP_MAX) | (head[name] < -_STAMP_MAX)).any():
            raise Unsupported
    buffer = pa.py_buffer(body)
    bodies = _ranges(buffer, body_start, body_end, pa.binary())
    try:
        texts = _ranges(buffer, props_start, props_end, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        raise Unsupported from None
    stamp = arrow_schema.field("born_timestamp").type
    columns = _property_columns(texts, n, stamp)

    queue_offset = head["queue_offset"].astype(np.int64)
    keep = queue_offset < end
    tag = columns["tags"]
    if tags is not None:
        keep &= (
            pc.is_in(tag, value_set=pa.array(sorted(tags), pa.string()))
            .fill_null(False)
            .to_numpy(zero_copy_only=False)
        )
    if not keep.any():
        return None
    retry = columns["retry"]
    topic_column = pa.repeat(pa.scalar(topic, pa.string()), n) if retry is None else retry
    message_id = columns["message_id"]
    if message_id.null_count:
        ids = message_id.to_pylist()
        store_ip, store_port, phys = head["store_ip"], head["store_port"], head["phys"]
        for i in np.flatnonzero(message_id.is_null().to_numpy(zero_copy_only=False)).tolist():
            ip = bytes(store_ip[i])
            host = f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}"
            ids[i] = msgid.offset_message_id(host, int(store_port[i]), int(phys[i]))
        message_id = pa.array(ids, pa.string())
    arrays = [
        topic_column,
        pa.array(head["queue_id"].astype(np.int32)),
        pa.array(queue_offset),
        message_id,
        tag,
        columns["keys"],
        bodies,
        columns["properties"],
        pa.array(head["born_ts"].astype(np.int64) * 1000).cast(stamp),
        pa.array(head["store_ts"].astype(np.int64) * 1000).cast(stamp),
        columns["deliver"],
        columns["group"],
        columns["txid"],
    ]
    try:
        batch = pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise Unsupported from None
    return batch if keep.all() else batch.filter(pa.array(keep))


def _entries(texts: Any, n: int) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """The properties entries of ``n`` records: names and values (string arrays), each entry's row, and
    whether its value is non-empty. ``decode``'s reading (entries split at ``\\x02``, empty ones
    skipped, the name ending at the first ``\\x01``) on the texts' bytes at once; a text that does not
    end with ``\\x02`` or an entry without ``\\x01`` is ``Unsupported``."""
    _, offsets_buffer, data_buffer = texts.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[texts.offset : texts.offset + n + 1]
    empty = np.zeros(0, dtype=np.int64)
    nothing = pa.array([], pa.string()), pa.array([], pa.string()), empty, empty.astype(bool)
    if data_buffer is None or offsets[-1] == offsets[0]:
        return nothing
    if offsets[0] != 0:
        raise Unsupported  # (a slice: ``take`` never gives one)
    data = np.frombuffer(data_buffer, dtype=np.uint8)[: offsets[-1]]
    ends = offsets[1:][offsets[1:] > offsets[:-1]]  # one past each non-empty text's last byte
    if (data[ends - 1] != 2).any():
        raise Unsupported  # a text not ending with \x02: the reference path
    item_end = np.flatnonzero(data == 2)
    item_start = np.empty_like(item_end)
    item_start[0] = offsets[0]
    item_start[1:] = item_end[:-1] + 1
    nonempty = item_end > item_start
    if not nonempty.all():
        item_start, item_end = item_start[nonempty], item_end[nonempty]
        if not len(item_start):
            return nothing
    ones = np.flatnonzero(data == 1)
    at = np.searchsorted(ones, item_start)
    if (at >= len(ones)).any():
        raise Unsupported  # an entry without a value: decode's error, from the reference path
    name_end = ones[at]
    if (name_end >= item_end).any():
        raise Unsupported
    parent = np.searchsorted(offsets, item_start, side="right") - 1
    names = _ranges(data_buffer, item_start, name_end, pa.string())
    values = _ranges(data_buffer, name_end + 1, item_end, pa.string())
    return names, values, parent, item_end > name_end + 1


def _property_columns(texts: Any, n: int, stamp: Any) -> dict[str, Any]:
    """The property-derived columns of ``n`` records from their properties texts (``rows._lean_columns``'s
    ``get(...) or None`` for each system property; the user properties as the map column)."""
    names, values, parent, filled = _entries(texts, n)
    encoded = pc.dictionary_encode(names)
    dictionary = encoded.dictionary.to_pylist()
    codes = encoded.indices.to_numpy().astype(np.int64)
    width = max(len(dictionary), 1)
    if len(codes) and np.bincount(parent * width + codes).max() > 1:
        raise Unsupported  # a property named twice in one record: dict semantics, the reference path
    code_of = {name: i for i, name in enumerate(dictionary)}

    def column(name: str) -> Any:
        """The values of property ``name``, null where absent or empty."""
        code = code_of.get(name)
        if code is None:
            return pa.nulls(n, pa.string())
        mask = (codes == code) & filled
        index = np.full(n, -1, dtype=np.int64)
        index[parent[mask]] = np.flatnonzero(mask)
        return values.take(pa.array(index, mask=index < 0))

    result: dict[str, Any] = {name: column(key) for name, key in (
        ("tags", props.TAGS), ("message_id", props.UNIQ_KEY), ("group", props.SHARDING_KEY),
        ("txid", props.TRANSACTION_ID),
    )}  # fmt: skip
    keys = column(props.KEYS)
    sep = props.KEY_SEPARATOR
    if (
        keys.null_count < n
        and pc.any(
            pc.or_(
                pc.match_substring(keys, sep + sep),
                pc.or_(pc.starts_with(keys, sep), pc.ends_with(keys, sep)),
            )
        ).as_py()
    ):
        raise Unsupported  # keys to normalise: the reference path
    result["keys"] = keys
    retry = column(props.RETRY_TOPIC) if props.RETRY_TOPIC in code_of else None
    if retry is not None and retry.null_count < n:
        raise Unsupported  # a retry topic replaces the topic: the reference path
    result["retry"] = None
    if props.TIMER_DELIVER_MS in code_of:
        texts_of = column(props.TIMER_DELIVER_MS).to_pylist()
        try:
            micros = [int(t) * 1000 if t is not None and t.isdecimal() else None for t in texts_of]
            result["deliver"] = pa.array(micros, pa.int64()).cast(stamp)
        except (ValueError, OverflowError, pa.ArrowInvalid):
            raise Unsupported from None
    else:
        result["deliver"] = pa.nulls(n, stamp)
    user = ~np.isin(codes, [code_of[k] for k in dictionary if k in _SYSTEM])
    counts = np.bincount(parent[user], minlength=n) if len(codes) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    where = pa.array(np.flatnonzero(user))
    result["properties"] = pa.MapArray.from_arrays(
        pa.array(offsets), names.take(where), values.take(where), type=pa.map_(pa.string(), pa.string())
    )
    return result
