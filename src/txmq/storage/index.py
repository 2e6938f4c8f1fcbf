"""The key index: message keys (and message ids) to CommitLog offsets.

On disk: append-only files in ``<data_dir>/index/`` of 24-byte entries, in log order::

    +---------------------------+---------------------------+---------------------------+
    | key hash u64 (blake2b-8)  | commit-log offset i64     | store timestamp ms i64    |
    +---------------------------+---------------------------+---------------------------+

In memory: a dict from key hash to ``[(offset, store_ms), ...]`` built at load. The index is derived:
it can be rebuilt from the log, and a hash collision is resolved by the caller re-checking the keys
of the record it reads. Which keys a record has is decided by an injected ``IndexKeysFn``.
"""

from __future__ import annotations

import hashlib
import posixpath
import struct

from txmq.common.invariant import invariant
from txmq.storage.api import IndexKeysFn
from txmq.storage.fs import FileHandle, FileSystem
from txmq.storage.segment import parse_segment_name, segment_name

ENTRY = struct.Struct(">Qqq")
ENTRY_BYTES = ENTRY.size
ENTRIES_PER_FILE = 1_000_000


def no_keys(topic: str, properties: bytes) -> list[str]:
    """The default IndexKeysFn: index nothing."""
    return []


def key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


class KeyIndex:
    def __init__(self, fs: FileSystem, directory: str, keys_fn: IndexKeysFn,
                 entries_per_file: int = ENTRIES_PER_FILE) -> None:  # fmt: skip
        self.fs = fs
        self.directory = directory
        self.keys_fn = keys_fn
        self.entries_per_file = entries_per_file
        self.files: list[tuple[int, str, FileHandle]] = []  # (sequence, path, handle)
        self.entries: dict[int, list[tuple[int, int]]] = {}
        self._pending = bytearray()
        self._dirty = False

    def load(self) -> None:
        self.fs.makedirs(self.directory)
        for name in self.fs.list_dir(self.directory):
            sequence = parse_segment_name(name)
            if sequence is not None:
                path = posixpath.join(self.directory, name)
                self.files.append((sequence, path, self.fs.open(path)))
        self.files.sort()
        for _, _, handle in self.files:
            data = handle.read_at(0, handle.size())
            if len(data) % ENTRY_BYTES:
                handle.truncate(len(data) - len(data) % ENTRY_BYTES)  # a torn entry
                data = data[: handle.size()]
            for hashed, offset, store_ms in ENTRY.iter_unpack(data):
                self.entries.setdefault(hashed, []).append((offset, store_ms))

    def add(self, topic: str, properties: bytes, physical_offset: int, store_ms: int) -> None:
        """Buffer entries for one record's keys (call write() after a batch)."""
        for key in self.keys_fn(topic, properties):
            hashed = key_hash(key)
            bucket = self.entries.setdefault(hashed, [])
            if bucket and bucket[-1][0] >= physical_offset:
                continue  # idempotent replay
            bucket.append((physical_offset, store_ms))
            self._pending += ENTRY.pack(hashed, physical_offset, store_ms)

    def write(self) -> None:
        data = memoryview(bytes(self._pending))
        self._pending.clear()
        while data:
            if not self.files or self.files[-1][2].size() >= self.entries_per_file * ENTRY_BYTES:
                self._new_file()
            handle = self.files[-1][2]
            room = self.entries_per_file * ENTRY_BYTES - handle.size()
            handle.append(data[:room])
            data = data[room:]
            self._dirty = True

    def _new_file(self) -> None:
        sequence = self.files[-1][0] + 1 if self.files else 0
        path = posixpath.join(self.directory, segment_name(sequence))
        self.files.append((sequence, path, self.fs.open(path)))
        self.fs.sync_dir(self.directory)

    def sync(self) -> None:
        if self._dirty:
            for _, _, handle in self.files:
                handle.sync()
        self._dirty = False

    def lookup(self, key: str, max_count: int, begin_ms: int, end_ms: int, min_offset: int) -> list[int]:
        """Newest-first log offsets for ``key`` within [begin_ms, end_ms], at most ``max_count``."""
        result: list[int] = []
        for offset, store_ms in reversed(self.entries.get(key_hash(key), [])):
            if len(result) >= max_count or offset < min_offset:
                break
            if begin_ms <= store_ms <= end_ms:
                result.append(offset)
        return result

    def truncate_from_physical(self, physical_offset: int) -> None:
        """Forget entries at or beyond ``physical_offset`` (recovery replays them)."""
        invariant(not self._pending, "truncate only with nothing buffered")
        for bucket in self.entries.values():
            while bucket and bucket[-1][0] >= physical_offset:
                bucket.pop()
        while self.files:
            _, path, handle = self.files[-1]
            data = handle.read_at(0, handle.size())
            keep = 0
            for keep_index, (_, offset, _) in enumerate(ENTRY.iter_unpack(data)):
                if offset >= physical_offset:
                    break
                keep = keep_index + 1
            if keep * ENTRY_BYTES == len(data):
                break
            handle.truncate(keep * ENTRY_BYTES)
            self._dirty = True
            if keep > 0:
                break
            if len(self.files) > 1:
                handle.close()
                self.fs.remove(path)
                self.files.pop()
            else:
                break

    def retire_below(self, log_min_offset: int) -> None:
        """Remove index files (and memory) that only point at deleted segments."""
        while len(self.files) > 1:
            _, path, handle = self.files[0]
            last = ENTRY.unpack(handle.read_at(handle.size() - ENTRY_BYTES, ENTRY_BYTES))[1]
            if last >= log_min_offset:
                break
            handle.close()
            self.fs.remove(path)
            self.files.pop(0)
        for hashed in list(self.entries):
            bucket = [entry for entry in self.entries[hashed] if entry[0] >= log_min_offset]
            if bucket:
                self.entries[hashed] = bucket
            else:
                del self.entries[hashed]

    def close(self) -> None:
        for _, _, handle in self.files:
            handle.close()
