"""A sealed (full, immutable) key index file: its sorted companion on disk, a few arrays in memory.

Holding one Python object per indexed message costs ~300 bytes of RSS each, so only the active index
file lives in a dict. When an entry file is full its entries are sorted by (hash, offset) and written
as a companion ``<name>.sorted``; memory then keeps only a Bloom filter (~10 bits an entry) and the
first hash of every block of ``index_block_entries`` sorted entries. A lookup tests the Bloom filter,
bisects the fences and reads the one or few blocks that can hold the hash.

Companion layout (written temp + fsync + rename, like other metadata)::

    +-------+---------+-------------+-------------+-----------+--------+---------+----------------+
    | magic | count   | fence count | bloom bytes | crc32c of | bloom  | fences  | sorted entries |
    |  u32  |  u64    |    u32      |    u32      | the rest  |        | u64 each| 24 bytes each  |
    +-------+---------+-------------+-------------+-----------+--------+---------+----------------+

The companion is derived from the entry file: if it is missing, torn, fails its checksum or does not
match the entry file's count, :func:`open_sealed` rebuilds it from the entry file.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Final

import crc32c

from txmq.common import limits
from txmq.storage.fs import FileHandle, FileSystem

ENTRY: Final = struct.Struct(">Qqq")
ENTRY_BYTES: Final = ENTRY.size
SORTED_SUFFIX: Final = ".sorted"
_MAGIC: Final = 0x5458494B  # "TXIK"
_HEADER: Final = struct.Struct(">IQIII")
_LITTLE: Final = sys.byteorder == "little"


def _big_endian(words: array[int]) -> array[int]:
    """Swap in place on little-endian hosts (files hold u64 big-endian); returns ``words``."""
    if _LITTLE:
        words.byteswap()
    return words


def bloom_mask(hashed: int) -> int:
    """The bits ``hashed`` sets in its Bloom word: a blocked Bloom filter (one 64-bit word per key,
    six bits in it) costs one array access per test, at a slightly higher false-positive
    rate than a classic one; the key hash is already uniform, so its low 36 bits pick the bits."""
    return (
        1 << (hashed & 63)
        | 1 << ((hashed >> 6) & 63)
        | 1 << ((hashed >> 12) & 63)
        | 1 << ((hashed >> 18) & 63)
        | 1 << ((hashed >> 24) & 63)
        | 1 << ((hashed >> 30) & 63)
    )


def build_bloom(hashes: array[int]) -> array[int]:
    words = array("Q", bytes(8 * max(1, -(-len(hashes) * limits.index_bloom_bits_per_entry // 64))))
    count = len(words)
    for hashed in hashes:  # bloom_mask inlined: this loop runs once per sealed entry
        words[(hashed >> 36) % count] |= (
            1 << (hashed & 63)
            | 1 << ((hashed >> 6) & 63)
            | 1 << ((hashed >> 12) & 63)
            | 1 << ((hashed >> 18) & 63)
            | 1 << ((hashed >> 24) & 63)
            | 1 << ((hashed >> 30) & 63)
        )
    return words


def bloom_may_contain(bloom: array[int], hashed: int) -> bool:
    mask = bloom_mask(hashed)
    return bloom[(hashed >> 36) % len(bloom)] & mask == mask


def build_companion(entry_data: bytes, block: int) -> bytes:
    """The companion file bytes for an entry file's content (whole 24-byte entries, in log order).

    Entries are in log order, so a stable sort by hash alone yields (hash, offset) order; the work is
    done on flat u64 arrays (no tuple per entry) because sealing runs on the dispatch path."""
    flat = _big_endian(array("Q", entry_data))
    hashes = flat[0::3]
    order = sorted(range(len(hashes)), key=hashes.__getitem__)
    by_hash = array("Q", [hashes[position] for position in order])
    offsets, stamps = flat[1::3], flat[2::3]
    flat[0::3] = by_hash
    flat[1::3] = array("Q", [offsets[position] for position in order])
    flat[2::3] = array("Q", [stamps[position] for position in order])
    bloom = _big_endian(build_bloom(by_hash))
    fences = _big_endian(by_hash[::block])
    body = bloom.tobytes() + fences.tobytes() + _big_endian(flat).tobytes()
    return _HEADER.pack(_MAGIC, len(by_hash), len(fences), len(bloom) * 8, crc32c.crc32c(body)) + body


@dataclass(slots=True)
class SealedFile:
    """In-memory summary of one sealed index file; ``companion`` is kept open for block reads."""

    count: int
    last_offset: int  # commit-log offset of the entry file's last entry (for retention)
    companion: FileHandle
    entries_start: int  # byte position of the sorted entries in the companion
    block: int  # sorted entries per fence
    fences: array[int]
    bloom: array[int]

    def matches(self, hashed: int) -> list[tuple[int, int]]:
        """``(offset, store_ms)`` of every entry with ``hashed``, oldest first."""
        if not self.count or not bloom_may_contain(self.bloom, hashed):
            return []
        first_block = max(0, bisect_left(self.fences, hashed) - 1)
        end_block = bisect_right(self.fences, hashed)
        if end_block <= first_block:
            return []
        first = first_block * self.block
        count = min(self.count, end_block * self.block) - first
        data = self.companion.read_at(self.entries_start + first * ENTRY_BYTES, count * ENTRY_BYTES)
        return [
            (offset, store_ms)
            for entry_hash, offset, store_ms in ENTRY.iter_unpack(data)
            if entry_hash == hashed
        ]

    def close(self) -> None:
        self.companion.close()


def _parse(data: bytes, expected_count: int, block: int) -> tuple[int, array[int], array[int]] | None:
    """(entries_start, fences, bloom) if ``data`` is a sound companion for ``expected_count`` entries."""
    if len(data) < _HEADER.size:
        return None
    magic, count, fence_count, bloom_bytes, crc = _HEADER.unpack_from(data, 0)
    body = memoryview(data)[_HEADER.size :]
    sound = (
        magic == _MAGIC
        and count == expected_count
        and fence_count == (count + block - 1) // block
        and bloom_bytes > 0
        and bloom_bytes % 8 == 0
        and len(body) == bloom_bytes + 8 * fence_count + ENTRY_BYTES * count
        and crc32c.crc32c(body) == crc
    )
    if not sound:
        return None
    bloom = _big_endian(array("Q", bytes(body[:bloom_bytes])))
    fences = _big_endian(array("Q", bytes(body[bloom_bytes : bloom_bytes + 8 * fence_count])))
    return _HEADER.size + bloom_bytes + 8 * fence_count, fences, bloom


def open_sealed(
    fs: FileSystem, entry_path: str, entry_data: bytes | None = None, block: int = limits.index_block_entries
) -> SealedFile:
    """Load the companion of ``entry_path``, (re)building it from the entry file if unsound.

    ``entry_data`` is the entry file's content when the caller already has it (sealing); otherwise the
    entry file is read only for its size and last entry, unless a rebuild is needed."""
    companion_path = entry_path + SORTED_SUFFIX
    entry_handle = fs.open(entry_path)
    try:
        entry_bytes = entry_handle.size() - entry_handle.size() % ENTRY_BYTES
        count = entry_bytes // ENTRY_BYTES
        last_offset = -1
        if count:
            last_offset = ENTRY.unpack(entry_handle.read_at(entry_bytes - ENTRY_BYTES, ENTRY_BYTES))[1]
        parsed = None
        if fs.exists(companion_path):
            handle = fs.open(companion_path)
            parsed = _parse(handle.read_at(0, handle.size()), count, block)
            handle.close()
        if parsed is None:
            if entry_data is None:
                entry_data = entry_handle.read_at(0, entry_bytes)
            write_companion(fs, companion_path, build_companion(entry_data[:entry_bytes], block))
            handle = fs.open(companion_path)
            parsed = _parse(handle.read_at(0, handle.size()), count, block)
            handle.close()
            assert parsed is not None, "a freshly built companion parses"
    finally:
        entry_handle.close()
    entries_start, fences, bloom = parsed
    return SealedFile(count, last_offset, fs.open(companion_path), entries_start, block, fences, bloom)


def write_companion(fs: FileSystem, path: str, data: bytes) -> None:
    """Atomically replace ``path`` (temp, fsync, rename, fsync dir) so a crash leaves old or new."""
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
    directory = path.rsplit("/", 1)[0] if "/" in path else "."
    fs.sync_dir(directory)
