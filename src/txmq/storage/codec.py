"""The CommitLog record layout: pure encode/decode, no I/O.

Every integer is big-endian. The CRC32C covers every byte after the crc field, so a flipped bit in
the header (sizes, offsets, timestamps) is caught as surely as one in the body::

     0       4       8      12      16      20              28              36      40
     +-------+-------+-------+-------+-------+---------------+---------------+-------+
     | magic | total | crc32c| queue | flag  | queue_offset  | physical_off  | sys   |
     |  u32  |  u32  |  u32  | id i32|  i32  |      i64      |      i64      |flag i32
     +-------+-------+-------+-------+-------+---------------+---------------+-------+
    40              48              56              64      68              76
     +---------------+---------------+---------------+-------+---------------+
     | born_ts i64   | store_ts i64  | tags_code i64 | recons| prepared_tx   |
     |               |               |               | i32   | offset i64    |
     +---------------+---------------+---------------+-------+---------------+
    76
     +-----+-------+----+-----------+----+------------+-----+------------+-----+------+
     |tlen | topic |bhl | born_host |shl | store_host |plen | properties |blen | body |
     | u16 |       | u8 |           | u8 |            | u16 |            | u32 |      |
     +-----+-------+----+-----------+----+------------+-----+------------+-----+------+
     |<---------------------------------- crc32c covers bytes [12, total) ------------>|

A segment that cannot hold the next record ends with a BLANK marker: ``BLANK_MAGIC u32`` and the
number of bytes left in the segment ``u32`` (8 bytes). If fewer than 8 bytes are left, nothing is
written and readers skip to the next segment.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, Final

import crc32c

from txmq.common import limits
from txmq.common.errors import CorruptRecord
from txmq.storage.api import RecordFields as RecordFields  # re-exported: the layout works on it
from txmq.storage.api import StoredRecord

if TYPE_CHECKING:  # only in annotations (never evaluated): compiled, a C int64_t; pure Python, an int
    from mypy_extensions import i64

MAGIC: Final = 0x54584D31  # "TXM1"
BLANK_MAGIC: Final = 0x54584D30  # "TXM0"
HEADER: Final = struct.Struct(">IIIiiqqiqqqiq")
HEADER_BYTES: Final = HEADER.size  # 76
BLANK: Final = struct.Struct(">II")
BLANK_BYTES: Final = BLANK.size  # 8
VAR_FIXED_BYTES: Final = 2 + 1 + 1 + 2 + 4  # the five length fields
RECORD_BYTES_MIN: Final = HEADER_BYTES + VAR_FIXED_BYTES
RECORD_BYTES_MAX: Final = limits.record_bytes_max
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_PREFIX = struct.Struct(">II")
_SPLIT_PREFIX = struct.Struct(">IIIiiqq")  # the header up to the physical offset
_TAGS_AT: Final = 56  # the tags code's place in the header
_crc32c: Final = crc32c.crc32c


def _load_batchenc() -> Any:
    """The C loops of a batched append (``txmq.storage._batchenc``, built beside the mypyc modules) or
    None: not built (no compiler, a pure install) or ``TXMQ_PURE=1``. The Python code they replace
    stays the reference (:func:`encode_batch_into_py`, ``index.key_digests_py``)."""
    try:
        return importlib.import_module("txmq.storage._batchenc")
    except ImportError:
        return None


BATCHENC: Final[Any] = _load_batchenc()
# its record encoder, bound once: compiled code calls it from a C static (no attribute read per record)
_ENCODE_RECORD: Final[Any] = None if BATCHENC is None else BATCHENC.encode_record

assert HEADER_BYTES == 76, "the layout diagram above must match the struct"
assert RECORD_BYTES_MIN < RECORD_BYTES_MAX


def encoded_size(topic: bytes, born_host: bytes, store_host: bytes, properties: bytes, body: bytes) -> int:
    """Bytes one record takes; the writer uses it to decide where the record lands before encoding."""
    return RECORD_BYTES_MIN + len(topic) + len(born_host) + len(store_host) + len(properties) + len(body)


_NAMES_CACHE_MAX = 4096
_names_cache: dict[tuple[bytes, bytes, bytes], bytes] = {}


def _names_part(topic: bytes, born_host: bytes, store_host: bytes) -> bytes:
    """The length-prefixed topic and hosts; cached, because a few topics and hosts repeat."""
    key = (topic, born_host, store_host)
    part = _names_cache.get(key)
    if part is None:
        part = b"".join((len(topic).to_bytes(2, "big"), topic, len(born_host).to_bytes(1, "big"), born_host,
                         len(store_host).to_bytes(1, "big"), store_host))  # fmt: skip
        if len(_names_cache) < _NAMES_CACHE_MAX:
            _names_cache[key] = part
    return part


def encode_into(
    buf: bytearray,
    pos: int,
    fields: RecordFields,
    *,
    store_host: bytes,
    queue_offset: int,
    physical_offset: int,
    store_timestamp_ms: int,
) -> int:
    """Encode one record at ``buf[pos:]`` (which must be large enough); returns its size.

    With the C extension (:data:`BATCHENC`) one call packs the header, the names part, the
    properties, the body and the CRC32C, checking every field and the buffer's room before a byte is
    written (struct's errors for a field out of range, ``OverflowError`` for a name too long, as the
    Python path raises them); without it, :func:`encode_into_py`, the reference the property tests
    hold it to (tests/property/test_encode_record_native.py)."""
    if _ENCODE_RECORD is None:
        return encode_into_py(
            buf, pos, fields, store_host=store_host, queue_offset=queue_offset,
            physical_offset=physical_offset, store_timestamp_ms=store_timestamp_ms,
        )  # fmt: skip
    size: int = _ENCODE_RECORD(
        buf, pos, fields, store_host, queue_offset, physical_offset, store_timestamp_ms
    )
    return size


def encode_into_py(
    buf: bytearray,
    pos: int,
    fields: RecordFields,
    *,
    store_host: bytes,
    queue_offset: int,
    physical_offset: int,
    store_timestamp_ms: int,
) -> int:
    """:func:`encode_into` in Python (the reference, and the path without the C extension)."""
    f = fields
    names = _names_part(f.topic, f.born_host, store_host)
    properties, body = f.properties, f.body
    size = HEADER_BYTES + len(names) + 6 + len(properties) + len(body)
    HEADER.pack_into(
        buf, pos, MAGIC, size, 0, f.queue_id, f.flag, queue_offset, physical_offset, f.sys_flag,
        f.born_timestamp_ms, store_timestamp_ms, f.tags_code, f.reconsume_times,
        f.prepared_transaction_offset,
    )  # fmt: skip
    p = pos + HEADER_BYTES
    end = p + len(names)
    buf[p:end] = names
    _U16.pack_into(buf, end, len(properties))
    p = end + 2
    end = p + len(properties)
    buf[p:end] = properties
    _U32.pack_into(buf, end, len(body))
    p = end + 4
    buf[p : p + len(body)] = body
    _U32.pack_into(buf, pos + 8, crc32c.crc32c(memoryview(buf)[pos + 12 : pos + size]))
    return size


Columns = tuple[tuple[Any, ...], ...]
"""A batch of :class:`RecordFields` as columns (``columns(records)[i]``: field ``i`` of every record)."""


def columns(records: Sequence[RecordFields]) -> Columns:
    """The records' fields as columns: one transpose in C, then every per-record step is a ``map``."""
    return tuple(zip(*records, strict=True))


def batch_sizes(cols: Columns, store_host: bytes) -> list[int]:
    """:func:`encoded_size` of every record of ``cols`` (a compiled loop: ``map(len, ...)`` and
    ``map(int.__add__, ...)`` cost ~300 instructions an element through builtins)."""
    topics, born_hosts, bodies, properties = cols[0], cols[8], cols[2], cols[3]
    if _uniform(topics) and _uniform(born_hosts):
        fixed = RECORD_BYTES_MIN + len(topics[0]) + len(born_hosts[0]) + len(store_host)
        if BATCHENC is not None:  # one C loop (no boxed int sums per record); None: the loop judges
            made: list[int] | None = BATCHENC.record_sizes(fixed, properties, bodies)
            if made is not None:
                return made
        return record_sizes_py(fixed, properties, bodies)
    sizes: list[int] = []
    for topic, born_host, props, body in zip(topics, born_hosts, properties, bodies, strict=True):
        sizes.append(
            HEADER_BYTES + 6 + len(_names_part(topic, born_host, store_host)) + len(props) + len(body)
        )
    return sizes


def record_sizes_py(fixed: int, properties: Sequence[Any], bodies: Sequence[Any]) -> list[int]:
    """``fixed + len(props) + len(body)`` of every record: the reference of ``_batchenc.record_sizes``."""
    sizes: list[int] = []
    for props, body in zip(properties, bodies, strict=True):
        sizes.append(fixed + len(props) + len(body))
    return sizes


def _uniform(column: tuple[Any, ...]) -> bool:
    first = column[0]
    return column.count(first) == len(column)


_HEADS_MAX = 1024
_heads: dict[tuple[int, int], struct.Struct] = {}


def _head(names_size: int, properties_size: int) -> struct.Struct:
    """The struct of a record up to its body: the header, the names part, the properties and the
    body's length; cached per (names size, properties size), which few values fill (one topic and
    host, the send lane's uniform properties), so no batch compiles a format of its own."""
    key = (names_size, properties_size)
    head = _heads.get(key)
    if head is None:
        head = struct.Struct(f">IIIiiqqiqqqiq{names_size}sH{properties_size}sI")
        if len(_heads) < _HEADS_MAX:
            _heads[key] = head
    return head


_UNIFORM_MID = struct.Struct(">Iii")  # crc (0 until computed), queue id, flag: bytes [8, 20)
_UNIFORM_TAIL = struct.Struct(">iqqqiq")  # sys flag .. prepared offset: bytes [36, 76)
_uniform_heads: dict[tuple[int, int], struct.Struct] = {}


def _uniform_head(tail_size: int, properties_size: int) -> struct.Struct:
    """The struct of a record up to its body when the batch's constant fields come pre-packed (see
    :func:`encode_batch_into`): magic, size, the crc/queue id/flag bytes, queue offset, physical
    offset, the constant tail (header fields, names part, properties length), the properties and the
    body's length. Cached as :func:`_head` is."""
    key = (tail_size, properties_size)
    head = _uniform_heads.get(key)
    if head is None:
        head = struct.Struct(f">II12sqq{tail_size}s{properties_size}sI")
        if len(_uniform_heads) < _HEADS_MAX:
            _uniform_heads[key] = head
    return head


def encode_batch_into(
    buf: bytearray,
    pos: int,
    physical_offset: int,
    cols: Columns,
    sizes: Sequence[int],
    *,
    store_host: bytes,
    queue_offsets: Iterable[int],
    store_timestamp_ms: int,
) -> list[int]:
    """Encode every record of ``cols`` (sizes ``sizes``, from :func:`batch_sizes`) back to back at
    ``buf[pos:]``, the first at log offset ``physical_offset``; returns each record's log offset.

    The same bytes as :func:`encode_into` record by record. With the C extension
    (:data:`BATCHENC`) one call encodes the whole batch (header, names, properties, body and CRC32C of
    every record, each bound-checked against the buffer before it is written); without it,
    :func:`encode_batch_into_py`, the reference the property tests hold the C loop to."""
    if BATCHENC is None:
        return encode_batch_into_py(
            buf, pos, physical_offset, cols, sizes, store_host=store_host, queue_offsets=queue_offsets,
            store_timestamp_ms=store_timestamp_ms,
        )  # fmt: skip
    (topics, queue_ids, bodies, properties, tags_codes, flags, sys_flags, born_ms, born_hosts,
     reconsume_times, prepared_offsets, _) = cols  # fmt: skip
    if _uniform(topics) and _uniform(born_hosts):
        names_col: Sequence[bytes] = [_names_part(topics[0], born_hosts[0], store_host)] * len(sizes)
    else:
        names_col = list(map(_names_part, topics, born_hosts, repeat(store_host)))
    offsets: list[int] = BATCHENC.encode_batch(
        buf, pos, physical_offset, sizes, queue_ids, flags, queue_offsets, sys_flags, born_ms,
        store_timestamp_ms, tags_codes, reconsume_times, prepared_offsets, names_col, properties, bodies,
    )  # fmt: skip
    return offsets


def encode_batch_into_py(
    buf: bytearray,
    pos: int,
    physical_offset: int,
    cols: Columns,
    sizes: Sequence[int],
    *,
    store_host: bytes,
    queue_offsets: Iterable[int],
    store_timestamp_ms: int,
) -> list[int]:
    """:func:`encode_batch_into` in Python (the reference, and the path without the C extension).

    Per record one pack of everything up to the body (a struct cached per names and properties size:
    no per-batch format to build and compile), one copy of the body and one CRC32C call. A batch
    whose header fields other than the offsets are one value each (the send lane's: one queue, one
    clock reading, no flags) has them packed once (:func:`_encode_uniform`): per record 8 fields to
    pack instead of 19."""
    (topics, queue_ids, bodies, properties, tags_codes, flags, sys_flags, born_ms, born_hosts,
     reconsume_times, prepared_offsets, _) = cols  # fmt: skip
    if (
        _uniform(topics) and _uniform(born_hosts) and _uniform(queue_ids) and _uniform(flags)
        and _uniform(sys_flags) and _uniform(born_ms) and _uniform(tags_codes) and _uniform(reconsume_times)
        and _uniform(prepared_offsets)
    ):  # fmt: skip
        return _encode_uniform(buf, pos, physical_offset, cols, sizes, store_host, queue_offsets,
                               store_timestamp_ms)  # fmt: skip
    count = len(sizes)
    offsets: list[int] = []
    if _uniform(topics) and _uniform(born_hosts):
        names_col: Sequence[bytes] = [_names_part(topics[0], born_hosts[0], store_host)] * count
    else:
        names_col = list(map(_names_part, topics, born_hosts, repeat(store_host)))
    pack_crc = _U32.pack_into
    shift = pos - physical_offset  # a record's position in ``buf`` is its log offset + shift
    offset = physical_offset
    names_size: int = len(names_col[0])
    properties_size: int = len(properties[0])
    head = _head(names_size, properties_size)
    size: int
    at: int
    end: int
    with memoryview(buf) as view:
        for (size, queue_id, flag, queue_offset, sys_flag, born, tags_code, reconsume, prepared, names,
             props, body) in zip(sizes, queue_ids, flags, queue_offsets, sys_flags, born_ms, tags_codes,
                                 reconsume_times, prepared_offsets, names_col, properties, bodies,
                                 strict=True):  # fmt: skip
            if len(props) != properties_size or len(names) != names_size:
                names_size, properties_size = len(names), len(props)
                head = _head(names_size, properties_size)
            at = offset + shift
            end = at + size
            head.pack_into(buf, at, MAGIC, size, 0, queue_id, flag, queue_offset, offset, sys_flag, born,
                           store_timestamp_ms, tags_code, reconsume, prepared, names, len(props), props,
                           len(body))  # fmt: skip
            view[end - len(body) : end] = body  # a bytearray's slice would copy ``body`` first
            pack_crc(buf, at + 8, _crc32c(view[at + 12 : end]))
            offsets.append(offset)
            offset += size
    return offsets


def _encode_uniform(
    buf: bytearray, pos: int, physical_offset: int, cols: Columns, sizes: Sequence[int], store_host: bytes,
    queue_offsets: Iterable[int], store_timestamp_ms: int,
) -> list[int]:  # fmt: skip
    """:func:`encode_batch_into_py` for a batch whose records differ only in properties, body, size and
    offsets: the crc placeholder, queue id and flag are packed once (12 bytes), and so are the header
    fields from the sys flag to the prepared offset, the names part and, per properties size, the
    properties' length (the tail); each record then packs 8 fields (two of them 64-bit integers,
    where the general struct converts six). The same bytes: the fields land where :data:`HEADER` and
    the names part put them."""
    (topics, queue_ids, bodies, properties, tags_codes, flags, sys_flags, born_ms, born_hosts,
     reconsume_times, prepared_offsets, _) = cols  # fmt: skip
    mid = _UNIFORM_MID.pack(0, queue_ids[0], flags[0])
    fixed = _UNIFORM_TAIL.pack(
        sys_flags[0], born_ms[0], store_timestamp_ms, tags_codes[0], reconsume_times[0], prepared_offsets[0]
    ) + _names_part(topics[0], born_hosts[0], store_host)  # fmt: skip
    properties_size: int = len(properties[0])
    tail = fixed + _U16.pack(properties_size)
    head = _uniform_head(len(tail), properties_size)
    pack_crc = _U32.pack_into
    shift = pos - physical_offset  # a record's position in ``buf`` is its log offset + shift
    offset = physical_offset
    offsets: list[int] = []
    size: int
    at: int
    end: int
    with memoryview(buf) as view:
        for size, queue_offset, props, body in zip(sizes, queue_offsets, properties, bodies, strict=True):
            if len(props) != properties_size:
                properties_size = len(props)
                tail = fixed + _U16.pack(properties_size)
                head = _uniform_head(len(tail), properties_size)
            at = offset + shift
            end = at + size
            head.pack_into(buf, at, MAGIC, size, mid, queue_offset, offset, tail, props, len(body))
            view[end - len(body) : end] = body  # a bytearray's slice would copy ``body`` first
            pack_crc(buf, at + 8, _crc32c(view[at + 12 : end]))
            offsets.append(offset)
            offset += size
    return offsets


def encode(fields: RecordFields, *, store_host: bytes, queue_offset: int, physical_offset: int,
           store_timestamp_ms: int) -> bytes:  # fmt: skip
    """Encode one record into fresh bytes (tests and tools; the writer uses :func:`encode_into`)."""
    size = encoded_size(fields.topic, fields.born_host, store_host, fields.properties, fields.body)
    buf = bytearray(size)
    encode_into(buf, 0, fields, store_host=store_host, queue_offset=queue_offset,
                physical_offset=physical_offset, store_timestamp_ms=store_timestamp_ms)  # fmt: skip
    return bytes(buf)


def encode_blank(bytes_left: int) -> bytes:
    return BLANK.pack(BLANK_MAGIC, bytes_left)


@dataclass(frozen=True, slots=True)
class Blank:
    """An end-of-segment marker; ``bytes_left`` counts itself and the unused space after it."""

    bytes_left: int


class NeedMore:
    """Not enough bytes yet for a whole record."""

    def __repr__(self) -> str:
        return "NEED_MORE"


NEED_MORE: Final = NeedMore()


def frame_size(buf: bytes | bytearray | memoryview, pos: int, offset: int) -> int | Blank | NeedMore:
    """Check the 8-byte prefix at ``buf[pos:]``: the record's declared size, a Blank, or NEED_MORE.

    ``offset`` is the log offset of ``buf[pos]``, used only in error messages.
    """
    if len(buf) - pos < _PREFIX.size:
        return NEED_MORE
    magic, size = _PREFIX.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return Blank(size)
    if magic != MAGIC:
        raise CorruptRecord(f"bad magic 0x{magic:08x} at offset {offset}", offset=offset)
    if not RECORD_BYTES_MIN <= size <= RECORD_BYTES_MAX:
        raise CorruptRecord(f"record size {size} out of bounds at offset {offset}", offset=offset)
    return int(size)


def decode(buf: bytes | bytearray | memoryview, pos: int = 0, *, offset: int | None = None) -> StoredRecord:
    """Decode and verify the whole record at ``buf[pos:]``.

    ``offset`` is where the record sits in the log (defaults to the offset stored in it); a record
    whose stored physical offset differs is rejected (a misdirected write).
    Raises CorruptRecord (wrong magic, size out of bounds or beyond the buffer, CRC mismatch,
    inconsistent inner lengths).
    """
    where = pos if offset is None else offset
    size = frame_size(buf, pos, where)
    if isinstance(size, Blank):
        raise CorruptRecord(f"end-of-segment marker where a record was expected at {where}", offset=where)
    if isinstance(size, NeedMore) or len(buf) - pos < size:
        raise CorruptRecord(f"record at offset {where} is cut short", offset=where)
    view = memoryview(buf)[pos : pos + size]
    (stored_crc,) = _U32.unpack_from(view, 8)
    if crc32c.crc32c(view[12:]) != stored_crc:
        raise CorruptRecord(f"CRC mismatch in record at offset {where}", offset=where)
    return _decode_verified(view, size, where, offset)


def _decode_verified(view: memoryview, size: int, where: int, offset: int | None) -> StoredRecord:
    (_, _, _, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, store_ts, tags_code,
     reconsume, prepared) = HEADER.unpack_from(view, 0)  # fmt: skip
    if offset is not None and physical_offset != offset:
        raise CorruptRecord(
            f"record at offset {offset} says it belongs at {physical_offset} (misdirected write)",
            offset=offset,
        )
    # the five length-prefixed parts, unrolled (this runs for every record a consumer reads)
    p = HEADER_BYTES + 2
    end = p + ((view[p - 2] << 8) | view[p - 1])  # size >= RECORD_BYTES_MIN: the length is there
    if end + 1 > size:
        raise _overrun(where)
    topic = view[p:end]
    p = end + 1
    end = p + view[p - 1]
    if end + 1 > size:
        raise _overrun(where)
    born_host = view[p:end]
    p = end + 1
    end = p + view[p - 1]
    if end + 2 > size:
        raise _overrun(where)
    store_host = view[p:end]
    p = end + 2
    end = p + ((view[p - 2] << 8) | view[p - 1])
    if end + 4 > size:
        raise _overrun(where)
    properties = view[p:end]
    p = end + 4
    end = p + _U32.unpack_from(view, end)[0]
    if end > size:
        raise _overrun(where)
    body = view[p:end]
    if end != size:
        raise CorruptRecord(f"inner lengths do not add up to the size at offset {where}", offset=where)
    try:
        topic_text, born_text, store_text = (
            str(topic, "utf-8"),
            str(born_host, "utf-8"),
            str(store_host, "utf-8"),
        )
    except UnicodeDecodeError:
        raise CorruptRecord(f"topic or host is not UTF-8 at offset {where}", offset=where) from None
    return StoredRecord(
        physical_offset=physical_offset, size=size, topic=topic_text, queue_id=queue_id,
        queue_offset=queue_offset, body=bytes(body), properties=bytes(properties), tags_code=tags_code,
        flag=flag, sys_flag=sys_flag, born_timestamp_ms=born_ts, born_host=born_text,
        store_timestamp_ms=store_ts, store_host=store_text, reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )  # fmt: skip


# A record's fields straight from its bytes (see :func:`split_checked`): size, queue_id, flag,
# queue_offset, physical_offset, sys_flag, born_ts, store_ts, tags_code, reconsume_times,
# prepared_tx_offset, names (the length-prefixed topic, born host and store host as stored: a few
# distinct values a reader can cache; :func:`names_of` splits them), properties, body (a view into
# the buffer).
RawRecord = tuple[int, int, int, int, int, int, int, int, int, int, int, bytes, bytes, memoryview]


def names_of(names: bytes) -> tuple[bytes, bytes, bytes]:
    """Topic, born host and store host (raw UTF-8) of a record's names part (``RawRecord[11]``)."""
    end = 2 + ((names[0] << 8) | names[1])
    topic = names[2:end]
    born_end = end + 1 + names[end]
    born_host = names[end + 1 : born_end]
    return topic, born_host, names[born_end + 1 : born_end + 1 + names[born_end]]


# names part -> (topic, born host, store host) as text: a log holds few distinct ones (bounded)
_names_text: dict[bytes, tuple[str, str, str]] = {}
_NAMES_TEXT_MAX = 4096


def stored_record(raw: RawRecord) -> StoredRecord:
    """The :class:`StoredRecord` :func:`decode` gives for the record ``raw`` holds the fields of (as
    :func:`split_checked` / :func:`split` return them: already checked), without decoding it again;
    the names part's text is cached. Raises CorruptRecord, as :func:`decode` does, when the topic or
    a host is not UTF-8."""
    (size, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, store_ts, tags_code,
     reconsume, prepared, names, properties, body) = raw  # fmt: skip
    text = _names_text.get(names)
    if text is None:
        topic, born_host, store_host = names_of(names)
        try:
            text = (str(topic, "utf-8"), str(born_host, "utf-8"), str(store_host, "utf-8"))
        except UnicodeDecodeError:
            raise CorruptRecord(
                f"topic or host is not UTF-8 at offset {physical_offset}", offset=physical_offset
            ) from None
        if len(_names_text) < _NAMES_TEXT_MAX:
            _names_text[bytes(names)] = text
    return StoredRecord(
        physical_offset, size, text[0], queue_id, queue_offset, bytes(body), bytes(properties), tags_code,
        flag, sys_flag, born_ts, text[1], store_ts, text[2], reconsume, prepared,
    )  # fmt: skip


def split(buf: bytes, pos: int = 0) -> RawRecord:
    """The fields of the whole, verified record at ``buf[pos:]`` (see :func:`split_checked`); raises
    CorruptRecord if it does not check out."""
    if len(buf) - pos < HEADER_BYTES:
        raise CorruptRecord(f"record at byte {pos} is cut short", offset=pos)
    _, size, _, _, _, _, offset = _SPLIT_PREFIX.unpack_from(buf, pos)
    fields = split_checked(buf, pos, memoryview(buf), offset, size)
    if fields is None:
        raise CorruptRecord(
            f"record at offset {offset} does not check out (magic, size, CRC or inner lengths)", offset=offset
        )
    return fields


def _u32(buf: bytes, p: int) -> int:
    return (buf[p] << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]


def _holds64(buf: bytes, p: int, value: int) -> bool:
    """Whether the big-endian 64 bits at ``buf[p:]`` are ``value`` (compared as two 32-bit halves:
    compiled, C integer arithmetic throughout, no boxed big ints)."""
    return _u32(buf, p) == (value >> 32) & 0xFFFFFFFF and _u32(buf, p + 4) == value & 0xFFFFFFFF


def names_unit(
    buf: bytes, pos: int, offset: int, size: int, queue_id: int, queue_offset: int, tags_code: int,
    topic: bytes,
) -> bool:  # fmt: skip
    """Whether the record header at ``buf[pos:]`` is the one a ConsumeQueue unit ``(offset, size,
    tags_code)`` of ``topic``'s queue ``queue_id`` at ``queue_offset`` names: magic, size, stored
    physical offset, queue id, queue offset, tags code and topic, as :func:`split_checked` holds a
    record to its unit, without the CRC or the fields (a unit check for records nobody reads: a tag
    filter's left-out units, the scans that act on a unit's tags code; their record, when read, is
    checked whole). Read byte by byte: a struct unpack boxes every field (~4x the instructions)."""
    names_start = pos + HEADER_BYTES
    if pos < 0 or pos + size > len(buf) or size < RECORD_BYTES_MIN:
        return False
    length = len(topic)
    if (
        _u32(buf, pos) != MAGIC
        or _u32(buf, pos + 4) != size
        or _u32(buf, pos + 12) != queue_id & 0xFFFFFFFF
        or not _holds64(buf, pos + 20, queue_offset)
        or not _holds64(buf, pos + 28, offset)
        or not _holds64(buf, pos + _TAGS_AT, tags_code)
        or ((buf[names_start] << 8) | buf[names_start + 1]) != length
        or names_start + 2 + length > pos + size
    ):
        return False
    at = names_start + 2
    for k in range(length):  # noqa: SIM110 - no slice, no iterator, no generator: a few instructions a byte
        if buf[at + k] != topic[k]:
            return False
    return True


def split_checked(
    buf: bytes,
    pos: int,
    view: memoryview,
    offset: int,
    size: int,
    queue_id: int = -1,
    queue_offset: int = 0,
    tags_code: int = 0,
    topic: bytes = b"",
) -> RawRecord | None:
    """The fields of the record at ``buf[pos:]`` (``view`` is ``memoryview(buf)``) if it is the
    record a ConsumeQueue unit ``(offset, size)`` points at and is whole: magic, size, stored physical
    offset, CRC32C over header and body, inner lengths adding up; with ``queue_id`` >= 0 also the
    unit's tags code, and ``topic``'s record at that queue id and queue offset (a unit damaged on disk
    names another record). None otherwise (the caller then
    reads it the general way, :func:`decode`, for the precise error). No dataclass, no text decoding:
    the pull path's read (``CommitLog.read_many_raw``)."""
    end_of_record = pos + size
    if end_of_record > len(buf) or size < RECORD_BYTES_MIN:
        return None
    (magic, stored_size, crc, stored_queue_id, flag, stored_queue_offset, physical_offset, sys_flag, born_ts,
     store_ts, stored_tags, reconsume, prepared) = HEADER.unpack_from(buf, pos)  # fmt: skip
    # typed locals: compiled, the compares are of C integers, not rich compares of the unpacked objects
    stored_magic: int = magic
    stored_length: int = stored_size
    stored_offset: int = physical_offset
    if (
        stored_magic != MAGIC
        or stored_length != size
        or stored_offset != offset
        or _crc32c(view[pos + 12 : end_of_record]) != crc
    ):
        return None
    names_start = pos + HEADER_BYTES
    topic_end = names_start + 2 + ((buf[names_start] << 8) | buf[names_start + 1])
    if queue_id >= 0:
        # typed locals: compiled, each compare is of C integers (the unpacked fields are objects)
        stored_id: int = stored_queue_id
        stored_at: int = stored_queue_offset
        stored_code: int = stored_tags
        length = len(topic)
        if (
            stored_id != queue_id
            or stored_at != queue_offset
            or stored_code != tags_code
            or topic_end - names_start - 2 != length
            or topic_end > end_of_record
        ):
            return None
        at = names_start + 2
        for k in range(length):  # no slice, no iterator: a few instructions a byte
            if buf[at + k] != topic[k]:
                return None
    p = topic_end  # the born host's length
    if p + 1 > end_of_record:
        return None
    p += 1 + buf[p]  # the store host's length
    if p + 1 > end_of_record:
        return None
    p += 1 + buf[p]  # the properties' length: the names part ends here
    if p + 2 > end_of_record:
        return None
    end = p + 2 + ((buf[p] << 8) | buf[p + 1])
    if end + 4 > end_of_record:
        return None
    names, properties = buf[names_start:p], buf[p + 2 : end]
    p = end + 4
    end = p + ((buf[p - 4] << 24) | (buf[p - 3] << 16) | (buf[p - 2] << 8) | buf[p - 1])
    if end != end_of_record:
        return None
    return (size, stored_queue_id, flag, stored_queue_offset, physical_offset, sys_flag, born_ts, store_ts,
            stored_tags, reconsume, prepared, names, properties, view[p:end])  # fmt: skip


class RecordSink:
    """What a fused queue read (``CommitLog.read_many_into``) hands its records to, instead of a list of
    :data:`RawRecord` tuples: :meth:`take` gets a record :func:`check_into` verified, as the pread
    buffer and the positions of its parts; :meth:`take_fields` a record that failed those checks and
    was read again the general way (its fields, checked). ``clear`` forgets everything taken (a read
    that rebuilt a damaged ConsumeQueue unit starts over). ``count``: records taken since."""

    count: int = 0

    def take(
        self, data: bytes, names_start: int, names_end: int, properties_end: int, body: memoryview,
        queue_id: int, queue_offset: int, physical_offset: int, born_ts: int, store_ts: int, reconsume: int,
    ) -> None:  # fmt: skip
        """The record whose names part is ``data[names_start:names_end]``, properties
        ``data[names_end + 2:properties_end]`` and body ``body`` (a view of ``data``)."""
        raise NotImplementedError

    def take_fields(self, fields: RawRecord) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError


def check_into(
    data: bytes,
    pos: int,
    view: memoryview,
    offset: int,
    size: int,
    queue_id: int,
    queue_offset: int,
    tags_code: int,
    topic: bytes,
    sink: RecordSink,
) -> bool:
    """:func:`split_checked` fused with its consumer: when the record at ``data[pos:]`` (``view`` is
    ``memoryview(data)``) is the one the ConsumeQueue unit ``(offset, size, tags_code)`` of ``topic``'s
    queue ``queue_id`` at ``queue_offset`` names and is whole (the same checks as
    :func:`split_checked` with a queue id: magic, size, stored physical offset, queue id, queue offset,
    tags code, topic, inner lengths adding up, CRC32C over header and body), hand it to
    ``sink.take`` and return True; else False, nothing taken (the caller reads it the general way).

    No RawRecord tuple, no struct call: only the header fields a pull answer needs are read, as C
    integers (:func:`_i64_at`); the CRC32C runs over a bytes copy of the short part before the body,
    then on over the body's view (the one the sink gets): one memoryview slice per record, not two."""
    end_of_record = pos + size
    if end_of_record > len(data) or size < RECORD_BYTES_MIN:
        return False
    # the header's fields read as C integers straight from the buffer (compiled: no struct call, no
    # tuple, no int objects), each exactly what HEADER.unpack_from gives (signed where it is signed)
    base: i64 = pos
    stored_id = _i32_at(data, base + 12)
    stored_at = _i64_at(data, base + 20)
    stored_offset = _i64_at(data, base + 28)
    stored_code = _i64_at(data, base + 56)
    if (
        _u32_at(data, base) != MAGIC
        or _u32_at(data, base + 4) != size
        or stored_offset != offset
        or stored_id != queue_id
        or stored_at != queue_offset
        or stored_code != tags_code
    ):
        return False
    names_start = pos + HEADER_BYTES
    topic_end = names_start + 2 + ((data[names_start] << 8) | data[names_start + 1])
    length = len(topic)
    if topic_end - names_start - 2 != length or topic_end > end_of_record:
        return False
    at = names_start + 2
    for k in range(length):  # no slice, no iterator: a few instructions a byte
        if data[at + k] != topic[k]:
            return False
    p = topic_end  # the born host's length
    if p + 1 > end_of_record:
        return False
    p += 1 + data[p]  # the store host's length
    if p + 1 > end_of_record:
        return False
    p += 1 + data[p]  # the properties' length: the names part ends here
    if p + 2 > end_of_record:
        return False
    properties_end = p + 2 + ((data[p] << 8) | data[p + 1])
    if properties_end + 4 > end_of_record:
        return False
    body_start = properties_end + 4
    body_end = body_start + (
        (data[body_start - 4] << 24) | (data[body_start - 3] << 16) | (data[body_start - 2] << 8)
        | data[body_start - 1]
    )  # fmt: skip
    if body_end != end_of_record:
        return False
    body = view[body_start:body_end]
    if _crc32c(body, _crc32c(data[pos + 12 : body_start])) != _u32_at(data, base + 8):
        return False
    sink.take(
        data, names_start, p, properties_end, body, stored_id, stored_at, stored_offset,
        _i64_at(data, base + 40), _i64_at(data, base + 48), _i32_at(data, base + 64),
    )  # fmt: skip
    return True


def _u32_at(data: bytes, at: i64) -> i64:
    """The big-endian u32 at ``data[at:at + 4]`` (the caller has checked the bounds)."""
    b0: i64 = data[at]
    b1: i64 = data[at + 1]
    b2: i64 = data[at + 2]
    b3: i64 = data[at + 3]
    return (b0 << 24) | (b1 << 16) | (b2 << 8) | b3


def _i32_at(data: bytes, at: i64) -> i64:
    """The big-endian signed i32 at ``data[at:at + 4]``."""
    return (_u32_at(data, at) ^ 0x80000000) - 0x80000000


def _i64_at(data: bytes, at: i64) -> i64:
    """The big-endian signed i64 at ``data[at:at + 8]`` (the high half signed, then scaled: no shift
    into the sign bit)."""
    return _i32_at(data, at) * 0x100000000 + _u32_at(data, at + 4)


def _overrun(where: int) -> CorruptRecord:
    return CorruptRecord(f"inner lengths overrun the record at offset {where}", offset=where)


class RecordReader:
    """Incremental decoder: ``feed`` bytes in any chunking, then ``next()`` until NEED_MORE.

    ``next()`` returns a verified StoredRecord, a Blank (the reader then expects nothing more: a
    segment's data ends there), or NEED_MORE. It raises CorruptRecord on bad input; bytes after the
    last complete record stay buffered (``pending``).
    """

    def __init__(self, start_offset: int = 0, *, check_offsets: bool = True) -> None:
        self._buf = bytearray()
        self._offset = start_offset
        self._check = check_offsets

    @property
    def offset(self) -> int:
        """Log offset of the next byte to decode."""
        return self._offset

    @property
    def pending(self) -> bytes:
        return bytes(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def next(self) -> StoredRecord | Blank | NeedMore:
        size = frame_size(self._buf, 0, self._offset)
        if isinstance(size, NeedMore):
            return size
        if isinstance(size, Blank):
            del self._buf[:BLANK_BYTES]
            self._offset += size.bytes_left
            return size
        if len(self._buf) < size:
            return NEED_MORE
        record = decode(self._buf, 0, offset=self._offset if self._check else None)
        del self._buf[:size]
        self._offset += size
        return record
