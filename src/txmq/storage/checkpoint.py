"""Checksummed metadata files written atomically, and the store checkpoint built on them.

``write_meta`` writes ``path.tmp``, fsyncs it, renames it over ``path`` and fsyncs the directory, so a
reader sees the old file or the new one, never a mix. The payload is framed as::

    +-------+---------+-----------+---------+
    | magic | length  | crc32c    | payload |
    |  u32  |   u32   | u32 (of   |         |
    |       |         |  payload) |         |
    +-------+---------+-----------+---------+

The broker reuses these two functions for topic config and consumer offsets.
"""

from __future__ import annotations

import json
import posixpath
import struct
from dataclasses import dataclass
from typing import Final

import crc32c

from txmq.common.errors import CorruptRecord, InvalidArgument
from txmq.storage.fs import FileSystem

META_MAGIC: Final = 0x54584D4D  # "TXMM"
_FRAME = struct.Struct(">III")
_CHECKPOINT = struct.Struct(">qqq")
CHECKPOINT_FILE: Final = "checkpoint"


def write_meta(fs: FileSystem, path: str, payload: bytes) -> None:
    """Atomically replace ``path`` with a checksummed ``payload`` (temp, fsync, rename, fsync dir)."""
    replace_file(fs, path, _FRAME.pack(META_MAGIC, len(payload), crc32c.crc32c(payload)) + payload)


def replace_file(fs: FileSystem, path: str, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``: temp file, fsync, rename, fsync of the directory, so a
    crash leaves the old file or the new one, never a mix."""
    temp = path + ".tmp"
    if fs.exists(temp):
        fs.remove(temp)
    handle = fs.open(temp)
    try:
        handle.append(data)
        handle.sync()
    finally:
        handle.close()
    fs.rename(temp, path)
    fs.sync_dir(posixpath.dirname(path) or ".")


def read_meta(fs: FileSystem, path: str) -> bytes | None:
    """The payload of a metadata file, ``None`` if it does not exist; CorruptRecord if damaged."""
    if not fs.exists(path):
        return None
    handle = fs.open(path)
    try:
        data = handle.read_at(0, handle.size())
    finally:
        handle.close()
    if len(data) < _FRAME.size:
        raise CorruptRecord(f"metadata file {path} is truncated ({len(data)} bytes)", offset=0)
    magic, length, crc = _FRAME.unpack_from(data, 0)
    payload = data[_FRAME.size :]
    if magic != META_MAGIC:
        raise CorruptRecord(f"metadata file {path} has a bad magic 0x{magic:08x}", offset=0)
    if length != len(payload):
        raise CorruptRecord(f"metadata file {path} says {length} bytes but holds {len(payload)}", offset=0)
    if crc32c.crc32c(payload) != crc:
        raise CorruptRecord(f"metadata file {path} fails its checksum", offset=0)
    return payload


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """``dispatched_offset``: ConsumeQueues and the index are durable for every record before it.
    ``flushed_offset``: the CommitLog was durable up to here when the checkpoint was taken.
    ``queue_ends``: (topic, queue id, max offset) of every ConsumeQueue, when they held exactly the
    records before ``dispatched_offset`` (None: not recorded); recovery finds a damaged queue with it."""

    dispatched_offset: int
    flushed_offset: int
    timestamp_ms: int
    queue_ends: tuple[tuple[str, int, int], ...] | None = None


def save_checkpoint(fs: FileSystem, data_dir: str, checkpoint: Checkpoint) -> None:
    assert checkpoint.dispatched_offset <= checkpoint.flushed_offset, "dispatch never passes flush"
    payload = _CHECKPOINT.pack(
        checkpoint.dispatched_offset, checkpoint.flushed_offset, checkpoint.timestamp_ms
    )
    if checkpoint.queue_ends is not None:
        payload += json.dumps(checkpoint.queue_ends, separators=(",", ":")).encode()
    write_meta(fs, posixpath.join(data_dir, CHECKPOINT_FILE), payload)


def load_checkpoint(fs: FileSystem, data_dir: str) -> Checkpoint | None:
    payload = read_meta(fs, posixpath.join(data_dir, CHECKPOINT_FILE))
    if payload is None:
        return None
    if len(payload) < _CHECKPOINT.size:
        raise CorruptRecord(f"checkpoint payload is {len(payload)} bytes, expected {_CHECKPOINT.size}")
    dispatched, flushed, timestamp_ms = _CHECKPOINT.unpack_from(payload)
    if len(payload) == _CHECKPOINT.size:
        return Checkpoint(dispatched, flushed, timestamp_ms)
    try:
        ends = tuple((str(t), int(q), int(n)) for t, q, n in json.loads(payload[_CHECKPOINT.size :]))
    except (ValueError, TypeError) as exc:
        raise CorruptRecord(f"checkpoint queue ends are unreadable: {exc}") from None
    return Checkpoint(dispatched, flushed, timestamp_ms, ends)


LAYOUT_FILE: Final = "layout"
_LAYOUT = struct.Struct(">Iq")
LAYOUT_VERSION: Final = 1


def load_layout(fs: FileSystem, data_dir: str) -> int | None:
    """The segment size the store in ``data_dir`` was created with (None for a new store)."""
    payload = read_meta(fs, posixpath.join(data_dir, LAYOUT_FILE))
    if payload is None:
        return None
    if len(payload) != _LAYOUT.size:
        raise CorruptRecord(f"store layout payload is {len(payload)} bytes, expected {_LAYOUT.size}")
    version, segment_bytes = _LAYOUT.unpack(payload)
    if version != LAYOUT_VERSION:
        raise CorruptRecord(f"store layout version {version} is not supported (expected {LAYOUT_VERSION})")
    return int(segment_bytes)


def pin_layout(fs: FileSystem, data_dir: str, segment_bytes: int) -> None:
    """Record the segment size on first open; refuse a different one later (offsets depend on it)."""
    existing = load_layout(fs, data_dir)
    if existing is None:
        write_meta(fs, posixpath.join(data_dir, LAYOUT_FILE), _LAYOUT.pack(LAYOUT_VERSION, segment_bytes))
    elif existing != segment_bytes:
        raise InvalidArgument(
            f"the store in {data_dir} uses segment_bytes={existing}; it cannot be opened with {segment_bytes}"
        )
