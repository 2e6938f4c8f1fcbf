"""Fixed-size CommitLog segment files, named by their 20-digit zero-padded start offset.

A segment's file grows by appends up to ``segment_bytes``; the next segment starts exactly
``segment_bytes`` later, so an offset maps to its segment by arithmetic. Reading a segment's records
(with CRC checks) is :func:`scan_segment`, shared by recovery, verify and retention.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass

from txmq.common.errors import CorruptRecord
from txmq.common.invariant import invariant
from txmq.storage import codec
from txmq.storage.api import StoredRecord
from txmq.storage.fs import FileHandle, FileSystem

NAME_DIGITS = 20
SCAN_CHUNK_BYTES = 1 << 20


def segment_name(base: int) -> str:
    return f"{base:0{NAME_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    return int(name) if len(name) == NAME_DIGITS and name.isdecimal() else None


@dataclass(slots=True)
class Segment:
    base: int
    path: str
    handle: FileHandle
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
            self.segments.append(Segment(base, path, self.fs.open(path)))
        self.segments.sort(key=lambda s: s.base)
        return notes

    @property
    def active(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def min_offset(self) -> int:
        return self.segments[0].base if self.segments else 0

    def create(self, base: int) -> Segment:
        invariant(base % self.segment_bytes == 0, f"segment base {base} is not aligned")
        invariant(not self.segments or base > self.segments[-1].base, "segments only grow")
        path = posixpath.join(self.directory, segment_name(base))
        segment = Segment(base, path, self.fs.open(path))
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
    """Why a segment scan stopped early: a bad record at ``offset``."""

    offset: int
    reason: str


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
