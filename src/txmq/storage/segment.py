"""Fixed-size CommitLog segment files, named by their 20-digit zero-padded start offset.

A segment holds at most ``segment_bytes``; the next segment starts exactly ``segment_bytes`` later,
so an offset maps to its segment by arithmetic. Reading a segment's records (with CRC checks) is
:func:`scan_segment`, shared by recovery, verify and retention.

**Preallocation.** A segment's file may be longer than its data: the zero-filled, fsynced space
after the data (the *prepared* space) is written over by later appends, so their fdatasync has no
file-size change to journal. :class:`SegmentFile` keeps the data end (``size()``) apart from the file's
length (``prepared()``); :meth:`SegmentFile.prepare` zero-fills ahead, off the append path. The data
ends where the file ends or where eight zero bytes stand in place of a record's magic and size (a
record's magic is never zero). After a crash, the prepared space may hold pieces of unsynced writes
(a disk writes sectors back in any order): recovery cuts them with the torn tail. A segment written
before preallocation (its file ends at its data) reads the same way.
"""

from __future__ import annotations

import errno
import functools
import os
import posixpath
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from txmq.common.errors import CorruptRecord
from txmq.common.invariant import invariant
from txmq.storage import codec
from txmq.storage.api import StoredRecord
from txmq.storage.fs import FileHandle, FileSystem

NAME_DIGITS = 20
SCAN_CHUNK_BYTES = 1 << 20
ZERO_PREFIX = bytes(codec.BLANK_BYTES)  # where a record's magic and size would be: the end of data
_ZERO_CHUNK = bytes(1 << 20)
SECTOR_BYTES = 512  # a disk writes sectors back whole, in any order


class SegmentFile:
    """A segment's file: ``size()`` is the end of its data, which may stop before the end of the file
    (``prepared()``); the bytes between are zeros written and fsynced ahead (:meth:`prepare`).

    Appends write at the data end (over the prepared zeros, or growing the file). Reads never see past
    the data end. :meth:`truncate` cuts the file itself (what it cut may not have been zeros).
    ``prepare`` may run in a worker thread while the loop appends: the lock keeps its zero-fill from
    ever landing over data (it starts past the data end, read under the lock)."""

    __slots__ = ("_attempt_end", "_end", "_free_bytes", "_lock", "_prepared", "path", "raw")

    def __init__(
        self, raw: FileHandle, path: str, free_bytes: Callable[[], int | None] | None = None
    ) -> None:
        self.raw = raw
        self.path = path
        self._free_bytes = free_bytes
        self._prepared = raw.size()
        self._end = self._prepared  # until recovery finds where the data ends (set_end)
        self._attempt_end = self._end  # where the last append would have ended
        self._lock = threading.Lock()

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Write at the data end; on OSError a prefix may have been written (``truncate`` undoes it)."""
        with self._lock:
            end = self._end
            self._attempt_end = end + len(data)
            if end + len(data) <= self._prepared and self._free_bytes is not None:
                # Over prepared space the write takes no new space; refuse it as the write growing
                # the file would have, so a full disk stops appends (DiskFull, nothing written)
                # before the ConsumeQueues and index, which grow with them, find no room.
                free = self._free_bytes()
                if free is not None and free < len(data):
                    self._attempt_end = end  # nothing written: nothing to undo
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
            self.raw.write_at(end, data)
            self._end = end + len(data)
            if self._end > self._prepared:
                self._prepared = self._end

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        raise NotImplementedError("a segment is written by appends only")

    def read_at(self, offset: int, size: int) -> bytes:
        end = self._end
        if offset + size > end:
            size = end - offset
            if size <= 0:
                return b""
        return self.raw.read_at(offset, size)

    def sync(self) -> None:
        self.raw.sync()

    def truncate(self, size: int) -> None:
        """Drop everything from ``size`` on. Cutting into the data (recovery, repair) cuts the file, its
        prepared space too (the next :meth:`prepare` zero-fills anew); undoing a failed append over
        prepared space puts the zeros back where it may have written, and cuts what it grew."""
        with self._lock:
            if size < self._end or size >= self._prepared:
                self.raw.truncate(size)
                self._end = self._prepared = size
                return
            if self.raw.size() > self._prepared:
                self.raw.truncate(self._prepared)
            position = size
            stop = min(self._attempt_end, self._prepared)
            while position < stop:
                chunk = min(stop - position, len(_ZERO_CHUNK))
                if self.raw.read_at(position, chunk).count(0) != chunk:  # (only where it wrote)
                    self.raw.write_at(position, memoryview(_ZERO_CHUNK)[:chunk])
                position += chunk
            self._end = size

    def size(self) -> int:
        return self._end

    def prepared(self) -> int:
        """The length of the file: data and the prepared space after it."""
        return self._prepared

    def set_end(self, end: int) -> None:
        """Recovery found the data ending at ``end`` with only zeros after it (up to ``prepared()``)."""
        invariant(0 <= end <= self._prepared, "the data ends inside the file")
        self._end = end

    def prepare(self, target: int) -> int:
        """Zero-fill the file from past the data end up to ``target`` bytes and fsync it; returns the
        bytes written. Raises OSError (a step a full disk cut short is given back first)."""
        written = 0
        while True:
            with self._lock:
                start = max(self._prepared, self._end)
                if start >= target:
                    break
                chunk = min(target - start, len(_ZERO_CHUNK))
                try:
                    self.raw.write_at(start, memoryview(_ZERO_CHUNK)[:chunk])
                except OSError:  # give back what a partial write took (a full disk): no data is there
                    if self.raw.size() > start:
                        self.raw.truncate(start)
                    raise
                self._prepared = start + chunk
                written += chunk
        if written:
            self.raw.sync()
        return written

    def close(self) -> None:
        self.raw.close()


def segment_name(base: int) -> str:
    return f"{base:0{NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    return int(name) if len(name) == NAME_DIGITS and name.isdecimal() else None


@dataclass(slots=True)
class Segment:
    base: int
    path: str
    handle: SegmentFile
    last_store_ms: int = -1  # newest store timestamp written, -1 until known

    @property
    def end(self) -> int:
        """Log offset just past the bytes in this file."""
        return self.base + self.handle.size()


class SegmentList:
    """The ordered segments of one CommitLog directory."""

    def __init__(self, fs: FileSystem, directory: str, segment_bytes: int) -> None:
        self.fs = fs
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []

    def load(self) -> list[str]:
        """Open every segment file; returns notes about files ignored."""
        self.fs.makedirs(self.directory)
        notes: list[str] = []
        for name in self.fs.list_dir(self.directory):
            base = parse_segment_name(name)
            if base is None or base % self.segment_bytes != 0:
                notes.append(f"ignored unexpected file {name} in {self.directory}")
                continue
            path = posixpath.join(self.directory, name)
            self.segments.append(Segment(base, path, self._file(path)))
        self.segments.sort(key=lambda s: s.base)
        return notes

    def _file(self, path: str) -> SegmentFile:
        return SegmentFile(self.fs.open(path), path, functools.partial(self.fs.free_bytes, self.directory))

    @property
    def active(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def min_offset(self) -> int:
        return self.segments[0].base if self.segments else 0

    def create(self, base: int) -> Segment:
        invariant(base % self.segment_bytes == 0, f"segment base {base} is not aligned")
        invariant(not self.segments or base > self.segments[-1].base, "segments only grow")
        path = posixpath.join(self.directory, segment_name(base))
        segment = Segment(base, path, self._file(path))
        self.segments.append(segment)
        self.fs.sync_dir(self.directory)
        return segment

    def locate(self, offset: int) -> Segment | None:
        if not self.segments or offset < self.segments[0].base:
            return None
        index = (offset - self.segments[0].base) // self.segment_bytes
        if index >= len(self.segments):
            return None
        segment = self.segments[index]
        invariant(segment.base <= offset < segment.base + self.segment_bytes, "segments are contiguous")
        return segment

    def remove_first(self) -> Segment:
        segment = self.segments.pop(0)
        segment.handle.close()
        self.fs.remove(segment.path)
        return segment

    def remove_last(self) -> Segment:
        segment = self.segments.pop()
        segment.handle.close()
        self.fs.remove(segment.path)
        return segment

    def close(self) -> None:
        for segment in self.segments:
            segment.handle.close()


@dataclass(frozen=True, slots=True)
class ScanStop:
    """Why a segment scan stopped early: a bad record at ``offset``, or (``zeros``) zero bytes where a
    record would start: the end of the data of a preallocated segment, if only zeros follow."""

    offset: int
    reason: str
    zeros: bool = False


ZERO_STOP_REASON = "zero bytes where a record should start"


def zeros_before_floor_reason(floor: int) -> str:
    """Zeros to the end of the file, but before the checkpoint's flushed offset: not the end of the
    data (fsynced records were there), cut and reported like any damaged tail."""
    return (
        f"{ZERO_STOP_REASON}, before the checkpoint's flushed offset {floor} "
        "(records fsynced there are missing)"
    )


def scan_segment(
    segment: Segment, start: int, segment_bytes: int
) -> Iterator[StoredRecord | ScanStop | codec.Blank]:
    """Yield every verified record of ``segment`` from log offset ``start``.

    Ends at the end of the data, or with a final Blank (the end marker), or with a final
    :class:`ScanStop` at the first bad or incomplete record (the caller decides whether that is a
    torn tail).
    """
    handle = segment.handle
    file_size = handle.size()
    pos = start - segment.base
    window = b""
    window_pos = pos
    while pos < file_size:
        if segment_bytes - pos < codec.BLANK_BYTES:
            return  # no room was left for an end marker
        rel = pos - window_pos
        if len(window) - rel < codec.HEADER_BYTES:
            window = handle.read_at(pos, SCAN_CHUNK_BYTES)
            window_pos, rel = pos, 0
        if window[rel : rel + codec.BLANK_BYTES] == ZERO_PREFIX:
            yield ScanStop(segment.base + pos, ZERO_STOP_REASON, True)
            return
        try:
            size = codec.frame_size(window, rel, segment.base + pos)
            if isinstance(size, codec.Blank):
                yield size
                return
            if isinstance(size, codec.NeedMore):
                yield ScanStop(segment.base + pos, "incomplete record header at end of data")
                return
            if len(window) - rel < size:
                window = handle.read_at(pos, max(size, SCAN_CHUNK_BYTES))
                window_pos, rel = pos, 0
            record = codec.decode(window, rel, offset=segment.base + pos)
        except CorruptRecord as exc:
            yield ScanStop(segment.base + pos, exc.message)
            return
        yield record
        pos += record.size


def records_from(segments: SegmentList, start: int, limit: int) -> Iterator[StoredRecord]:
    """Every verified record from log offset ``start`` (a record's start, a segment's end marker or the
    log's end; before the oldest segment it starts there) up to ``limit``, in log order, across
    segments. A scan that stops early (zeros, a bad record) ends the iteration: recovery has already
    judged the log, so that is the end of the data."""
    start = max(start, segments.min_offset())
    for segment in list(segments.segments):
        if segment.base + segments.segment_bytes <= start:
            continue
        for item in scan_segment(segment, max(start, segment.base), segments.segment_bytes):
            if isinstance(item, ScanStop):
                return
            if isinstance(item, StoredRecord):
                if item.physical_offset >= limit:
                    return
                yield item


def has_valid_record_after(segment: Segment, offset: int) -> int | None:
    """The offset of the first verifiable record starting after ``offset`` in ``segment``, if any."""
    magic = codec.MAGIC.to_bytes(4, "big")
    data = segment.handle.read_at(offset - segment.base + 1, segment.handle.size())
    at = data.find(magic)
    while at >= 0:
        candidate = offset + 1 + at
        try:
            codec.decode(data, at, offset=candidate)
            return candidate
        except CorruptRecord:
            at = data.find(magic, at + 1)
    return None


def holds_record(segment: Segment) -> bool:
    """Not empty, and no zeros where its first record would start (a preallocated segment whose
    first write never became durable holds nothing: every later fsync would have covered it)."""
    handle = segment.handle
    return handle.size() > 0 and handle.read_at(0, len(ZERO_PREFIX)) != ZERO_PREFIX


def zeros_from(segment: Segment, offset: int) -> int:
    """Where the last byte that is not zero ends in ``segment`` at or after ``offset`` (``offset`` if
    every byte from there to the end of the file is zero)."""
    handle = segment.handle
    start = offset - segment.base
    end = handle.size()
    last = start
    position = start
    while position < end:
        chunk = handle.read_at(position, min(SCAN_CHUNK_BYTES, end - position))
        if not chunk:
            break
        stripped = len(chunk.rstrip(b"\0"))
        if stripped:
            last = position + stripped
        position += len(chunk)
    return segment.base + last


def unwritten_sector_between(segment: Segment, start: int, end: int) -> bool:
    """Whether a whole disk sector of zeros lies in ``[start, end)`` of ``segment``: the mark of a
    write the disk never put down (the file held zeros there before it), not of a flipped bit."""
    first = start - segment.base
    data = segment.handle.read_at(first, end - start)
    zero = bytes(SECTOR_BYTES)
    at = -first % SECTOR_BYTES
    while at + SECTOR_BYTES <= len(data):
        if data[at : at + SECTOR_BYTES] == zero:
            return True
        at += SECTOR_BYTES
    return False


@dataclass(frozen=True, slots=True)
class StopVerdict:
    """What a scan's stop in ``segment`` is, as recovery and verify both judge it.

    ``at_end``: zeros to the end of the file at or past the checkpoint's flushed offset, the end of a
    preallocated segment's data. Otherwise ``following`` is the next valid record (None: none),
    ``unsynced`` says whether the bytes up to it are what a crash leaves of an unsynced write put down
    out of order (at or past the floor, and zeros or a never-written sector between), and ``reason``
    replaces the stop's own when zeros run to the end before the floor (fsynced records are missing).
    """

    at_end: bool
    following: int | None = None
    unsynced: bool = False
    reason: str | None = None


def ends_before_floor_reason(end: int, floor: int) -> str:
    """The log's data ends (a file cut short, a segment gone) before the checkpoint's flushed offset:
    records fsynced there are missing. Recovery reports it, verify names it."""
    return (
        f"the log's data ends at offset {end}, before the checkpoint's flushed offset {floor} "
        "(records fsynced there are missing)"
    )


def judge_stop(segment: Segment, offset: int, zeros: bool, floor: int) -> StopVerdict:
    """Judge a scan's stop at ``offset`` (``zeros``: zero bytes where a record would start) against the
    checkpoint's flushed offset ``floor``; whether the segment is the log's tail is the caller's part."""
    zeros_to_end = zeros and zeros_from(segment, offset) == offset
    if zeros_to_end and offset >= floor:
        return StopVerdict(at_end=True)
    following = has_valid_record_after(segment, offset)
    unsynced = (
        following is not None
        and offset >= floor
        and (zeros or unwritten_sector_between(segment, offset, following))
    )
    return StopVerdict(False, following, unsynced, zeros_before_floor_reason(floor) if zeros_to_end else None)
