"""The CommitLog: single-writer appends of single records and atomic batches, reads by offset.

A batch is encoded into one buffer and written with one append, so it lands whole or not at all (a
failed write is truncated back). A batch never spans segments: if it does not fit the active
segment, the segment is closed with a blank marker and the batch goes to a new one. Queue offsets
per (topic, queue id) are assigned here, and committed only after the write succeeded.
"""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from txmq.common.clock import Clock
from txmq.common.errors import DiskFull, InvalidOffset, MessageTooLarge, StorageError, StoreFenced
from txmq.common.invariant import invariant
from txmq.storage import codec
from txmq.storage.api import AppendResult, StoredRecord
from txmq.storage.segment import Segment, SegmentList

_READ_AHEAD_BYTES = 4096


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


class CommitLog:
    def __init__(self, segments: SegmentList, clock: Clock, store_host: bytes) -> None:
        self.segments = segments
        self.clock = clock
        self.store_host = store_host
        self.segment_bytes = segments.segment_bytes
        self.write_offset = 0  # next physical offset to write
        self.queue_next: dict[tuple[str, int], int] = {}
        self.pending: deque[DispatchEntry] = deque()  # appended, not yet dispatched
        self.dirty: dict[int, Segment] = {}  # segments with writes no fsync covered yet, by base
        self.fence_reason: str | None = None
        self._buf = bytearray(64 * 1024)

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
        self.check_writable()
        invariant(len(batch) > 0, "append needs at least one record")
        sizes = [
            codec.encoded_size(f.topic, f.born_host, self.store_host, f.properties, f.body) for _, f in batch
        ]
        total = sum(sizes)
        limit = self.segment_bytes - codec.BLANK_BYTES
        if total > limit:
            raise MessageTooLarge("the record or batch", total, limit)
        segment = self._reserve(total)
        start = self.write_offset
        now_ms = self.clock.now_ms()
        if len(self._buf) < total:
            self._buf = bytearray(max(total, 2 * len(self._buf)))
        next_offsets: dict[tuple[str, int], int] = {}
        results: list[AppendResult] = []
        entries: list[DispatchEntry] = []
        pos = 0
        for (topic, fields), size in zip(batch, sizes, strict=True):
            key = (topic, fields.queue_id)
            queue_offset = next_offsets.get(key, self.queue_next.get(key, 0))
            next_offsets[key] = queue_offset + 1
            codec.encode_into(self._buf, pos, fields, store_host=self.store_host, queue_offset=queue_offset,
                              physical_offset=start + pos, store_timestamp_ms=now_ms)  # fmt: skip
            results.append(AppendResult(start + pos, size, queue_offset, now_ms))
            entries.append(DispatchEntry(start + pos, size, topic, fields.queue_id, queue_offset,
                                         fields.tags_code, now_ms, fields.properties))  # fmt: skip
            pos += size
        self._write(segment, memoryview(self._buf)[:total])
        self.write_offset = start + total
        self.queue_next.update(next_offsets)
        self.pending.extend(entries)
        segment.last_store_ms = now_ms
        return results

    def append_one(self, topic: str, fields: codec.RecordFields) -> AppendResult:
        """The single-record path of :meth:`append`, kept lean: it is the broker's hot path."""
        if self.fence_reason is not None:
            self.check_writable()
        size = codec.encoded_size(
            fields.topic, fields.born_host, self.store_host, fields.properties, fields.body
        )
        if size > self.segment_bytes - codec.BLANK_BYTES:
            raise MessageTooLarge("the record or batch", size, self.segment_bytes - codec.BLANK_BYTES)
        segment = self._reserve(size)
        start = self.write_offset
        key = (topic, fields.queue_id)
        queue_offset = self.queue_next.get(key, 0)
        now_ms = self.clock.now_ms()
        if len(self._buf) < size:
            self._buf = bytearray(max(size, 2 * len(self._buf)))
        codec.encode_into(self._buf, 0, fields, store_host=self.store_host, queue_offset=queue_offset,
                          physical_offset=start, store_timestamp_ms=now_ms)  # fmt: skip
        self._write(segment, memoryview(self._buf)[:size])
        self.write_offset = start + size
        self.queue_next[key] = queue_offset + 1
        self.pending.append(DispatchEntry(start, size, topic, fields.queue_id, queue_offset, fields.tags_code,
                                          now_ms, fields.properties))  # fmt: skip
        segment.last_store_ms = now_ms
        return AppendResult(start, size, queue_offset, now_ms)

    def _reserve(self, total: int) -> Segment:
        """The segment the next ``total`` bytes go to, rolling (with a blank marker) if needed."""
        segment = self.segments.active
        if segment is not None and self.write_offset < segment.base + self.segment_bytes:
            left = segment.base + self.segment_bytes - self.write_offset
            if total <= left:
                return segment
            if left >= codec.BLANK_BYTES:
                self._write(segment, codec.encode_blank(left))
            self.write_offset = segment.base + self.segment_bytes
        try:
            segment = self.segments.create(self.write_offset)
        except OSError as exc:
            self.fence(f"creating a segment at offset {self.write_offset} failed: {exc}")
            raise StoreFenced(f"the store is read-only until restarted: {self.fence_reason}") from exc
        return segment

    def _write(self, segment: Segment, data: bytes | memoryview) -> None:
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
    def read(self, physical_offset: int, limit: int) -> StoredRecord:
        """The verified record at ``physical_offset`` (which must be below ``limit``)."""
        if physical_offset < 0:
            raise InvalidOffset(f"physical offset {physical_offset} is negative")
        if physical_offset >= limit:
            raise InvalidOffset(f"physical offset {physical_offset} is beyond the readable end {limit}")
        segment = self.segments.locate(physical_offset)
        if segment is None:
            raise InvalidOffset(f"physical offset {physical_offset} is not in the log (deleted?)")
        pos = physical_offset - segment.base
        data = segment.handle.read_at(pos, _READ_AHEAD_BYTES)
        size = codec.frame_size(data, 0, physical_offset)
        if isinstance(size, codec.Blank | codec.NeedMore):
            raise InvalidOffset(f"no record starts at physical offset {physical_offset}")
        if size > len(data):
            data = segment.handle.read_at(pos, size)
        return codec.decode(data, 0, offset=physical_offset)

    def store_ms_at(self, physical_offset: int) -> int:
        """The store timestamp of the record at ``physical_offset`` (header only, for searches)."""
        segment = self.segments.locate(physical_offset)
        if segment is None:
            raise StorageError(f"physical offset {physical_offset} is not in the log")
        header = segment.handle.read_at(physical_offset - segment.base, codec.HEADER_BYTES)
        return int(codec.HEADER.unpack(header)[9])
