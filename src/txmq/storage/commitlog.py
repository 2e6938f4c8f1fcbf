"""The CommitLog: single-writer appends of single records and atomic batches, reads by offset.

Appends are encoded into an in-memory *group buffer*; :meth:`CommitLog.write_buffered` hands the
whole group to the file with one ``write`` (the group commit calls it just before its fsync, the
ASYNC writer once per event-loop turn). One write per group instead of one per record is most of
what a 1 KB append costs in Python. A group lands whole or not at all: a failed write is truncated
back and the group is rolled back (write offset, queue offsets, pending dispatch entries), so a
failed group consumes no queue offset. ``write_offset`` counts buffered bytes; ``written_offset``
is where the file ends. Nothing reads beyond ``written_offset``.

A batch never spans segments: if it does not fit the active segment, the buffered group and a
blank marker are written to it and the batch goes to a new one. ``on_written`` / ``on_write_failed``
tell the group commit which appends a write covered or failed.

Preallocation: :meth:`CommitLog.prepare_due` says when the active segment's prepared (zero-filled,
fsynced) space after the data has run low (below half of ``prealloc_bytes``); the group commit then
runs :meth:`SegmentFile.prepare` off the append path, so appends write over allocated zeros and their
fdatasync has no file size to journal (``segment.py``).
"""

from __future__ import annotations

import errno
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from typing import Final, NamedTuple

from txmq.common import limits
from txmq.common.clock import Clock
from txmq.common.errors import (
    CorruptRecord,
    DiskFull,
    InvalidOffset,
    MessageTooLarge,
    StorageError,
    StoreFenced,
)
from txmq.common.fastinit import tuple_maker
from txmq.common.invariant import InvariantViolation, invariant
from txmq.storage import codec
from txmq.storage.api import AppendResult, StoredRecord
from txmq.storage.osfile import OsFileHandle
from txmq.storage.segment import Segment, SegmentFile, SegmentList

_LOG = logging.getLogger(__name__)
_READ_AHEAD_BYTES = 4096
_PAGE_BYTES = 4096
_SPAN_BYTES_MAX = 1 << 20  # one pread covers records of a pull up to this far apart


def damaged_record_message(reason: str, segment_path: str, physical_offset: int) -> str:
    """One line for a record the log cannot serve: the reason, the segment, and ``txmq store repair``
    with the store directory (the segment's grandparent: ``<store>/commitlog/<segment>``)."""
    store_dir = os.path.dirname(os.path.dirname(segment_path))
    return (
        f"{reason} (CommitLog segment {segment_path}, log offset {physical_offset}): the log is damaged "
        f"there and this queue cannot be read past it; stop the broker and run "
        f"`txmq store repair --data-dir {store_dir}` (`txmq store verify` shows what it would cut)"
    )


class DispatchEntry(NamedTuple):
    """What the dispatcher needs of one appended record (no re-read of the log)."""

    physical_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    store_ms: int
    properties: bytes
    index_keys: tuple[str, ...] | None = None  # known keys (PutRequest.index_keys), else keys_fn's


class BatchEntry(NamedTuple):
    """What the dispatcher needs of an appended batch, as columns (one entry for the whole batch):
    ``physical_offset`` and ``size`` span every record of it, so it is dispatched whole."""

    physical_offset: int  # the first record's
    size: int  # every record's bytes
    topics: Sequence[str]
    queue_ids: Sequence[int]
    queue_offsets: Sequence[int]
    offsets: Sequence[int]  # each record's physical offset
    sizes: Sequence[int]
    tags_codes: Sequence[int]
    store_ms: int
    properties: Sequence[bytes]
    index_keys: Sequence[tuple[str, ...] | None]
    one_queue: bool  # every record goes to the same (topic, queue id): queue offsets are a range


class BatchAppend(NamedTuple):
    """Where a batch landed, as columns (no object per record)."""

    physical_offsets: Sequence[int]
    sizes: Sequence[int]
    queue_offsets: Sequence[int]
    store_timestamp_ms: int

    def results(self) -> list[AppendResult]:
        """One :class:`AppendResult` per record (built by ``tuple.__new__``: no Python call each)."""
        return list(
            map(_new_tuple, repeat(AppendResult),
                zip(self.physical_offsets, self.sizes, self.queue_offsets, repeat(self.store_timestamp_ms)))
        )  # fmt: skip


_new_tuple = tuple.__new__


class CommitLog:
    def __init__(self, segments: SegmentList, clock: Clock, store_host: bytes) -> None:
        self.segments = segments
        self.clock = clock
        self.store_host = store_host
        self.segment_bytes = segments.segment_bytes
        self.write_offset = 0  # next physical offset to append (buffered bytes included)
        self.queue_next: dict[tuple[str, int], int] = {}
        self.pending: deque[DispatchEntry | BatchEntry] = deque()  # appended, not yet dispatched
        self.dirty: dict[int, Segment] = {}  # segments with writes no fsync covered yet, by base
        self.fence_reason: str | None = None
        self._buf = bytearray(256 * 1024)  # the group buffer: bytes [written_offset, write_offset)
        self._fill = 0
        self._group_queue_base: dict[tuple[str, int], int] = {}  # queue offsets when the group began
        # the active segment as the last append found it, and its end: appends that fit skip _reserve
        self._room_segment: Segment | None = None
        self._room_end = 0
        self.on_written: Callable[[], None] | None = None
        self.on_write_failed: Callable[[Exception], None] | None = None
        self.prealloc_bytes = 0  # zero-filled space kept ready after the data (0: files grow by appends)
        self._prealloc_stopped: SegmentFile | None = None  # a full disk stopped preparing this segment
        self._damage_logged: set[int] = set()  # offsets of damaged records the log already named

    # -- preallocation
    def prepare_due(self) -> tuple[SegmentFile, int] | None:
        """The active segment's file and the length to zero-fill it to, when less than half of
        ``prealloc_bytes`` is prepared past the appended bytes; else None."""
        step = self.prealloc_bytes
        segment = self.segments.active
        if step <= 0 or segment is None or self.fence_reason is not None:
            return None
        handle = segment.handle
        if handle is self._prealloc_stopped:
            return None
        prepared = handle.prepared()
        used = self.write_offset - segment.base
        if prepared >= self.segment_bytes or prepared - used >= step // 2:
            return None
        target = min(self.segment_bytes, (used + step + _PAGE_BYTES - 1) // _PAGE_BYTES * _PAGE_BYTES)
        return handle, target

    def prepare_failed(self, handle: SegmentFile, exc: OSError) -> None:
        """Zero-filling ahead failed: on a full disk stop preparing this segment (appends grow its
        file, as without preallocation; the next segment, made once there is room, tries again); any
        other error (a failed fsync) fences the store."""
        if exc.errno == errno.ENOSPC:
            self._prealloc_stopped = handle
            return
        self.fence(f"preparing {handle.path} ahead failed: {exc}")

    def prepare_ahead(self) -> int:
        """Zero-fill ahead now if due (tests, stepping, open); returns the bytes written."""
        due = self.prepare_due()
        if due is None:
            return 0
        handle, target = due
        try:
            return handle.prepare(target)
        except OSError as exc:
            self.prepare_failed(handle, exc)
            self.check_writable()
            return 0

    @property
    def written_offset(self) -> int:
        """End of the bytes handed to the file (what readers may see at most)."""
        return self.write_offset - self._fill

    @property
    def buffered_bytes(self) -> int:
        return self._fill

    # -- fencing
    def fence(self, reason: str) -> None:
        if self.fence_reason is None:
            self.fence_reason = reason

    def check_writable(self) -> None:
        if self.fence_reason is not None:
            raise StoreFenced(f"the store is read-only until restarted: {self.fence_reason}")

    # -- append
    def append(self, batch: Sequence[tuple[str, codec.RecordFields]]) -> list[AppendResult]:
        """Append records atomically; returns their offsets. Raises StoreFenced / DiskFull."""
        if len(batch) == 0:  # invariant() inline: an interpreted call per append otherwise
            raise InvariantViolation("append needs at least one record")
        if len(batch) <= limits.append_small_batch:
            return self._append_few(batch)
        topics = [topic for topic, _ in batch]
        return self.append_records(topics, [fields for _, fields in batch]).results()

    def append_records(
        self, topics: str | Sequence[str], records: Sequence[codec.RecordFields], columns: codec.Columns = ()
    ) -> BatchAppend:
        """Append records atomically, each under its topic (``topics``: one name for all, or one per
        record); returns where they landed as columns (:class:`BatchAppend`). Raises StoreFenced /
        DiskFull / MessageTooLarge.

        The batch is laid out in one pass (:func:`codec.encode_batch_into`: per record one struct pack
        up to the body, one body copy, one CRC32C call) into the group buffer, and queued for dispatch as one
        :class:`BatchEntry`; the bytes are those :func:`codec.encode_into` writes record by record.
        ``columns``: ``codec.columns(records)``, when the caller has them already."""
        return self.append_columns(topics, columns or codec.columns(records))

    def append_columns(self, topics: str | Sequence[str], columns: codec.Columns) -> BatchAppend:
        """:meth:`append_records` of records given as columns (``codec.columns(records)``)."""
        self.check_writable()
        count = len(columns[0]) if columns else 0
        invariant(count > 0, "append needs at least one record")
        sizes = codec.batch_sizes(columns, self.store_host)
        total = sum(sizes)
        limit = self.segment_bytes - codec.BLANK_BYTES
        if total > limit:
            raise MessageTooLarge("the record or batch", total, limit)
        segment = self._reserve(total)
        start = self.write_offset
        now_ms = self.clock.now_ms()
        self._ensure_room(total)
        queue_ids = columns[1]
        queue_next = self.queue_next
        # one queue: every id equals the first (count: one C loop, where min and max over the column
        # each cost ~300 instructions an id)
        one_key = isinstance(topics, str) and queue_ids.count(queue_ids[0]) == count
        next_offsets: dict[tuple[str, int], int] = {}
        if one_key:
            assert isinstance(topics, str)
            key = (topics, queue_ids[0])
            first = queue_next.get(key, 0)
            queue_offsets: Sequence[int] = range(first, first + count)
            next_offsets[key] = first + count
            topic_column: Sequence[str] = [topics] * count
        else:
            topic_column = [topics] * count if isinstance(topics, str) else list(topics)
            invariant(len(topic_column) == count, "one topic per record")
            offsets_list: list[int] = []
            for key in zip(topic_column, queue_ids, strict=True):
                queue_offset = next_offsets.get(key)
                if queue_offset is None:
                    queue_offset = queue_next.get(key, 0)
                offsets_list.append(queue_offset)
                next_offsets[key] = queue_offset + 1
            queue_offsets = offsets_list
        physical = codec.encode_batch_into(
            self._buf, self._fill, start, columns, sizes, store_host=self.store_host,
            queue_offsets=queue_offsets, store_timestamp_ms=now_ms,
        )  # fmt: skip
        # the batch is encoded: only now take its queue offsets (an encoding error leaves no gap)
        group_base = self._group_queue_base
        for key in next_offsets:
            if key not in group_base:
                group_base[key] = queue_next.get(key, 0)
        queue_next.update(next_offsets)
        self._fill += total
        self.write_offset = start + total
        entry = BatchEntry(start, total, topic_column, queue_ids, queue_offsets, physical, sizes, columns[4],
                           now_ms, columns[3], columns[11], one_key)  # fmt: skip
        self.pending.append(entry)
        segment.last_store_ms = now_ms
        return BatchAppend(physical, sizes, queue_offsets, now_ms)

    def append_one(self, topic: str, fields: codec.RecordFields) -> AppendResult:
        """The single-record path of :meth:`append`, kept lean: it is the broker's hot path."""
        if self.fence_reason is not None:
            self.check_writable()
        size = (
            codec.RECORD_BYTES_MIN + len(fields.topic) + len(fields.born_host) + len(self.store_host)
            + len(fields.properties) + len(fields.body)
        )  # fmt: skip
        if size > self.segment_bytes - codec.BLANK_BYTES:
            raise MessageTooLarge("the record or batch", size, self.segment_bytes - codec.BLANK_BYTES)
        start = self.write_offset
        segment = self._room_segment
        if segment is None or start + size > self._room_end:  # the first append, or a roll
            segment = self._reserve(size)
            start = self.write_offset
        key = (topic, fields.queue_id)
        queue_offset = self.queue_next.get(key, 0)
        if key not in self._group_queue_base:
            self._group_queue_base[key] = queue_offset
        now_ms = self.clock.now_ms()
        fill = self._fill
        if fill + size > len(self._buf):
            self._ensure_room(size)
        codec.encode_into(self._buf, fill, fields, store_host=self.store_host, queue_offset=queue_offset,
                          physical_offset=start, store_timestamp_ms=now_ms)  # fmt: skip
        self._fill = fill + size
        self.write_offset = start + size
        self.queue_next[key] = queue_offset + 1
        # one C call each (_MAKE_*: a NamedTuple class call runs its interpreted __new__), twice per message;
        # the ints both take boxed once (object locals), not once per tuple
        at: object = start
        length: object = size
        unit: object = queue_offset
        stamp: object = now_ms
        self.pending.append(_MAKE_DISPATCH_ENTRY(
            at, length, topic, fields.queue_id, unit, fields.tags_code, stamp, fields.properties,
            fields.index_keys,
        ))  # fmt: skip
        segment.last_store_ms = now_ms
        result: AppendResult = _MAKE_APPEND_RESULT(at, length, unit, stamp)
        return result

    def _append_few(self, batch: Sequence[tuple[str, codec.RecordFields]]) -> list[AppendResult]:
        """:meth:`append` of a small batch (a transaction commit's message and op record): each record
        encoded as :meth:`append_one` encodes it, at successive offsets of one segment, and nothing
        taken (bytes, queue offsets, dispatch entries) until every record is encoded: all or none, as
        the columnar path. The same bytes, offsets and results as :meth:`append_records`."""
        if self.fence_reason is not None:
            self.check_writable()
        host_bytes = codec.RECORD_BYTES_MIN + len(self.store_host)
        sizes: list[int] = []
        total = 0
        for _, fields in batch:
            size = (
                host_bytes
                + len(fields.topic)
                + len(fields.born_host)
                + len(fields.properties)
                + len(fields.body)
            )
            sizes.append(size)
            total += size
        limit = self.segment_bytes - codec.BLANK_BYTES
        if total > limit:
            raise MessageTooLarge("the record or batch", total, limit)
        start = self.write_offset
        segment = self._room_segment
        if segment is None or start + total > self._room_end:  # the first append, or a roll
            segment = self._reserve(total)
            start = self.write_offset
        now_ms = self.clock.now_ms()
        fill = self._fill
        if fill + total > len(self._buf):
            self._ensure_room(total)
        buf, store_host, queue_next = self._buf, self.store_host, self.queue_next
        keys: list[tuple[str, int]] = []
        queue_offsets: list[int] = []
        position, physical = fill, start
        for i in range(len(batch)):
            topic, fields = batch[i]
            size = sizes[i]
            key = (topic, fields.queue_id)
            queue_offset = -1
            j = i - 1
            while j >= 0:  # the last earlier record of the batch in this queue: a few records, no dict
                if keys[j] == key:
                    queue_offset = queue_offsets[j] + 1
                    break
                j -= 1
            if queue_offset < 0:
                queue_offset = queue_next.get(key, 0)
            codec.encode_into(buf, position, fields, store_host=store_host, queue_offset=queue_offset,
                              physical_offset=physical, store_timestamp_ms=now_ms)  # fmt: skip
            keys.append(key)
            queue_offsets.append(queue_offset)
            position += size
            physical += size
        # every record is encoded: only now take the queue offsets and the bytes (an error leaves no gap);
        # record by record, a queue's group base before its first record's offset, its next after its last
        group_base = self._group_queue_base
        for i in range(len(keys)):
            key = keys[i]
            if key not in group_base:
                group_base[key] = queue_next.get(key, 0)
            queue_next[key] = queue_offsets[i] + 1
        self._fill = fill + total
        self.write_offset = start + total
        results: list[AppendResult] = []
        pending = self.pending
        physical = start
        stamp: object = now_ms  # boxed once for every tuple below (object locals: no boxing per use)
        for i in range(len(batch)):
            topic, fields = batch[i]
            size = sizes[i]
            at: object = physical
            length: object = size
            unit: object = queue_offsets[i]
            pending.append(_MAKE_DISPATCH_ENTRY(
                at, length, topic, fields.queue_id, unit, fields.tags_code, stamp, fields.properties,
                fields.index_keys,
            ))  # fmt: skip
            result: AppendResult = _MAKE_APPEND_RESULT(at, length, unit, stamp)
            results.append(result)
            physical += size
        segment.last_store_ms = now_ms
        return results

    def _ensure_room(self, size: int) -> None:
        if self._fill + size > len(self._buf):
            grown = bytearray(max(self._fill + size, 2 * len(self._buf)))
            grown[: self._fill] = self._buf[: self._fill]
            self._buf = grown

    def _reserve(self, total: int) -> Segment:
        """The segment the next ``total`` bytes go to, rolling (with a blank marker) if needed.

        Rolling writes the buffered group and the blank marker to the old segment first, so the
        buffer only ever holds bytes of the active segment."""
        segment = self.segments.active
        if segment is not None:
            segment_end = segment.base + self.segment_bytes
            left = segment_end - self.write_offset
            if left > 0:
                if total <= left:
                    self._room_segment, self._room_end = segment, segment_end
                    return segment
                if left >= codec.BLANK_BYTES:
                    self._ensure_room(codec.BLANK_BYTES)
                    codec.BLANK.pack_into(self._buf, self._fill, codec.BLANK_MAGIC, left)
                    self._fill += codec.BLANK_BYTES
                    self.write_offset += codec.BLANK_BYTES
            # also when the buffered group filled the segment to its last byte (left == 0): its bytes
            # belong to this segment, and write_buffered writes to the active one, which is about to change
            self.write_buffered()
            self.write_offset = segment_end
        try:
            segment = self.segments.create(self.write_offset)
        except OSError as exc:
            self.fence(f"creating a segment at offset {self.write_offset} failed: {exc}")
            raise StoreFenced(f"the store is read-only until restarted: {self.fence_reason}") from exc
        self._room_segment, self._room_end = segment, segment.base + self.segment_bytes
        return segment

    def write_buffered(self) -> bool:
        """Write the buffered group with one append; False if nothing was buffered.

        On failure the group is rolled back (nothing of it stays in the file, its queue offsets are
        free again), ``on_write_failed`` is told, and DiskFull (ENOSPC) or StoreFenced is raised."""
        if self._fill == 0:
            return False
        if self.fence_reason is not None:  # fenced after these were buffered: they never land
            self._rollback()
            error = StoreFenced(f"the store is read-only until restarted: {self.fence_reason}")
            if self.on_write_failed is not None:
                self.on_write_failed(error)
            raise error
        segment = self.segments.active
        if segment is None:  # invariant() inline: an interpreted call per group otherwise
            raise InvariantViolation("buffered bytes belong to the active segment")
        data: bytes | bytearray | memoryview
        if type(segment.handle.raw) is OsFileHandle:
            # the real file's pwrite has the bytes before append returns and keeps nothing: the group
            # goes out of the buffer in place, not copied (~1 KB of copying per 1 KB message); the
            # buffer is only ever replaced when it grows, never resized, so the view blocks nothing
            data = memoryview(self._buf)[: self._fill]
        else:  # a copy: a FaultyFileSystem keeps it while the next group reuses the buffer
            data = self._buf[: self._fill]
        try:
            self._write(segment, data)
        except (DiskFull, StoreFenced) as exc:
            self._rollback()
            if self.on_write_failed is not None:
                self.on_write_failed(exc)
            raise
        self._fill = 0
        self._group_queue_base.clear()
        if self.on_written is not None:
            self.on_written()
        return True

    def _rollback(self) -> None:
        """Forget the buffered group: offsets back to where it began, its dispatch entries dropped."""
        start = self.written_offset
        self.write_offset = start
        self.queue_next.update(self._group_queue_base)
        self._group_queue_base.clear()
        self._fill = 0
        pending = self.pending
        while pending and pending[-1].physical_offset >= start:
            pending.pop()

    def _write(self, segment: Segment, data: bytes | bytearray | memoryview) -> None:
        """One append; on failure undo the partial write, then DiskFull (ENOSPC) or fence."""
        size_before = segment.handle.size()
        try:
            segment.handle.append(data)
        except OSError as exc:
            undone = self._undo(segment, size_before)
            if exc.errno == errno.ENOSPC and undone:
                raise DiskFull(
                    f"no space left writing {len(data)} bytes to {segment.path}; nothing was written"
                ) from exc
            self.fence(f"write to {segment.path} failed: {exc}")
            raise StoreFenced(f"the store is read-only until restarted: {self.fence_reason}") from exc
        self.dirty[segment.base] = segment

    def _undo(self, segment: Segment, size: int) -> bool:
        try:
            segment.handle.truncate(size)
        except OSError as exc:
            self.fence(f"could not truncate a partial write in {segment.path}: {exc}")
            return False
        return True

    def take_dirty(self) -> list[Segment]:
        """Segments to fsync, oldest first (so a later segment is never durable before an earlier)."""
        dirty = [self.dirty[base] for base in sorted(self.dirty)]
        self.dirty.clear()
        return dirty

    # -- read
    def read(self, physical_offset: int, limit: int, quiet: bool = False) -> StoredRecord:
        """The verified record at ``physical_offset`` (which must be below ``limit``). ``quiet``: a
        damaged record is not logged (the caller judges first whether the log or its pointer is wrong,
        then :meth:`note_damage`)."""
        if physical_offset < 0:
            raise InvalidOffset(f"physical offset {physical_offset} is negative")
        if physical_offset >= limit:
            raise InvalidOffset(f"physical offset {physical_offset} is beyond the readable end {limit}")
        segment = self.segments.locate(physical_offset)
        if segment is None:
            raise InvalidOffset(f"physical offset {physical_offset} is not in the log (deleted?)")
        pos = physical_offset - segment.base
        data = segment.handle.read_at(pos, _READ_AHEAD_BYTES)
        try:
            size = codec.frame_size(data, 0, physical_offset)
            if isinstance(size, codec.Blank | codec.NeedMore):
                raise InvalidOffset(f"no record starts at physical offset {physical_offset}")
            if size > len(data):
                data = segment.handle.read_at(pos, size)
            return codec.decode(data, 0, offset=physical_offset)
        except CorruptRecord as exc:
            raise self._damaged(exc, segment.path, physical_offset, quiet) from None

    def _damaged(
        self, exc: CorruptRecord, segment_path: str, physical_offset: int, quiet: bool = False
    ) -> CorruptRecord:
        """The error a read of a damaged record gives: what is wrong, where, and what the operator
        runs; the broker's log says it once per record (not once per pull that reaches it)."""
        error = CorruptRecord(damaged_record_message(exc.message, segment_path, physical_offset),
                              offset=physical_offset)  # fmt: skip
        if not quiet:
            self.note_damage(error)
        return error

    def note_damage(self, error: CorruptRecord) -> None:
        """Log a damaged record's error, once per record."""
        physical_offset = error.offset
        if physical_offset not in self._damage_logged:
            if len(self._damage_logged) < limits.damaged_records_logged_max:
                self._damage_logged.add(physical_offset)
            _LOG.error("%s", error.message)

    def _runs(
        self, locations: Sequence[tuple[int, int, int, int]], limit: int
    ) -> Iterator[tuple[bytes | None, int, Sequence[tuple[int, int, int, int]]]]:
        """Ascending ``(offset, size, tags code, queue offset)`` locations split into runs of nearby
        records in one segment, each read with one pread: ``(data, first offset, the run's
        locations)``. A location the log cannot serve that way (outside it, beyond ``limit``) comes
        alone with ``data`` None."""
        i, count = 0, len(locations)
        while i < count:
            first, first_size, _, _ = locations[i]
            sound = 0 <= first < limit and codec.RECORD_BYTES_MIN <= first_size <= codec.RECORD_BYTES_MAX
            segment = self.segments.locate(first) if sound else None
            if segment is None:
                yield None, first, locations[i : i + 1]
                i += 1
                continue
            bound = min(limit, segment.base + self.segment_bytes, first + _SPAN_BYTES_MAX)
            j, end = i + 1, first + first_size
            while j < count:
                offset, size, _, _ = locations[j]
                if offset < end or offset + size > bound or size < codec.RECORD_BYTES_MIN:
                    break
                end = offset + size
                j += 1
            yield segment.handle.read_at(first - segment.base, end - first), first, locations[i:j]
            i = j

    def read_many_raw(
        self,
        locations: Sequence[tuple[int, int, int, int]],
        limit: int,
        quiet: bool = False,
        topic: bytes = b"",
        queue_id: int = -1,
    ) -> list[codec.RawRecord]:
        """The verified records at ascending ``(offset, size, tags code, queue offset)`` locations (a
        queue's units; with ``queue_id`` >= 0 each record must also be the one its unit names: that tags
        code, topic, queue id and queue offset, else CorruptRecord, never logged), one pread
        per run of nearby records in one segment instead of one per record, each as its raw fields
        (:func:`codec.split_checked`: no dataclass, no text decoding, the body a view of the pread buffer;
        ``codec.stored_record`` makes the StoredRecord of one). The checks are those of :meth:`read`
        (magic, the unit's size, CRC32C over header and body, the stored physical offset, inner
        lengths); a record failing any goes through :meth:`read`, which raises the error a single read
        gives or returns the record found there (then its fields are returned)."""
        records: list[codec.RawRecord] = []
        for data, first, run in self._runs(locations, limit):
            if data is None:
                offset, size, tags_code, queue_offset = run[0]
                fields = self._read_unit(offset, size, tags_code, queue_offset, topic, queue_id, limit, quiet)
                records.append(fields)
                continue
            view = memoryview(data)
            for offset, size, tags_code, queue_offset in run:
                checked = codec.split_checked(  # a direct native call when compiled (no boxed arguments)
                    data, offset - first, view, offset, size, queue_id, queue_offset, tags_code, topic
                )
                if checked is None:  # the general read's error, or the record found there, checked
                    checked = self._read_unit(
                        offset, size, tags_code, queue_offset, topic, queue_id, limit, quiet
                    )
                records.append(checked)
        return records

    def read_many_into(
        self,
        locations: Sequence[tuple[int, int, int, int]],
        limit: int,
        topic: bytes,
        queue_id: int,
        sink: codec.RecordSink,
        quiet: bool = False,
    ) -> None:
        """:meth:`read_many_raw` fused with its consumer: each record goes to ``sink`` (checked by
        :func:`codec.check_into`, the same checks, a unit's included) instead of into a list of
        RawRecord tuples. A record failing them goes through :meth:`read` as in :meth:`read_many_raw`
        (its error raised, or the record found there checked against its unit and given to
        ``sink.take_fields``)."""
        for data, first, run in self._runs(locations, limit):
            if data is None:
                offset, size, tags_code, queue_offset = run[0]
                fields = self._read_unit(offset, size, tags_code, queue_offset, topic, queue_id, limit, quiet)
                sink.take_fields(fields)
                continue
            view = memoryview(data)
            for offset, size, tags_code, queue_offset in run:
                if not codec.check_into(  # a direct native call when compiled (no boxed arguments)
                    data, offset - first, view, offset, size, queue_id, queue_offset, tags_code, topic, sink
                ):  # the general read's error, or the record found there, checked
                    sink.take_fields(
                        self._read_unit(offset, size, tags_code, queue_offset, topic, queue_id, limit, quiet)
                    )

    def units_named(
        self, locations: Sequence[tuple[int, int, int, int]], limit: int, topic: bytes, queue_id: int
    ) -> bool:
        """Whether each ascending ``(offset, size, tags code, queue offset)`` location (a unit of
        ``topic``'s queue ``queue_id``) names its record (:func:`codec.names_unit`: the header only, no
        CRC), one pread per run of nearby records. False at the first that does not, or that the log
        cannot serve (outside it, beyond ``limit``)."""
        for data, first, run in self._runs(locations, limit):
            if data is None:
                return False
            for offset, size, tags_code, queue_offset in run:
                pos = offset - first
                if not codec.names_unit(data, pos, offset, size, queue_id, queue_offset, tags_code, topic):
                    return False
        return True

    def _read_unit(
        self, offset: int, size: int, tags_code: int, queue_offset: int, topic: bytes, queue_id: int,
        limit: int, quiet: bool,
    ) -> codec.RawRecord:  # fmt: skip
        """The slow path of :meth:`read_many_raw` and :meth:`read_many_into`: the record at ``offset`` by a
        full read (:meth:`_read_raw`: its errors), checked to be the one its ConsumeQueue unit names
        (the fast path's check is in :func:`codec.split_checked`)."""
        fields = self._read_raw(offset, limit, quiet)
        if queue_id < 0:
            return fields
        if (
            fields[0] != size or fields[1] != queue_id or fields[3] != queue_offset or fields[8] != tags_code
            or codec.names_of(fields[11])[0] != topic
        ):  # fmt: skip
            raise CorruptRecord(
                f"the record at log offset {offset} is not the one its ConsumeQueue unit names "
                f"(queue offset {queue_offset})",
                offset=offset,
            )
        return fields

    def _read_raw(self, physical_offset: int, limit: int, quiet: bool) -> codec.RawRecord:
        """The slow path of :meth:`read_many_raw`: a full read (its errors), then the record's fields."""
        record = self.read(physical_offset, limit, quiet)
        segment = self.segments.locate(physical_offset)
        invariant(segment is not None, "read() found the segment")
        assert segment is not None
        return codec.split(segment.handle.read_at(physical_offset - segment.base, record.size), 0)

    def store_ms_at(self, physical_offset: int) -> int:
        """The store timestamp of the record at ``physical_offset`` (header only, for searches)."""
        segment = self.segments.locate(physical_offset)
        if segment is None:
            raise StorageError(f"physical offset {physical_offset} is not in the log")
        header = segment.handle.read_at(physical_offset - segment.base, codec.HEADER_BYTES)
        return int(codec.HEADER.unpack(header)[9])


# NamedTuples made per message by one C call each (fastinit.tuple_maker: tuple.__new__'s object without
# the class's interpreted __new__ and without an argument tuple); Final: compiled code reads C statics
_MAKE_DISPATCH_ENTRY: Final = tuple_maker(DispatchEntry)
_MAKE_APPEND_RESULT: Final = tuple_maker(AppendResult)
