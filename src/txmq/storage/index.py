"""The key index: message keys (and message ids) to CommitLog offsets.

On disk: append-only files in ``<data_dir>/index/`` of 24-byte entries, in log order::

    +---------------------------+---------------------------+---------------------------+
    | key hash u64 (blake2b-8)  | commit-log offset i64     | store timestamp ms i64    |
    +---------------------------+---------------------------+---------------------------+

Memory is bounded: only the newest (active) file, at most ``index_entries_per_file`` entries, is held
in memory (:class:`ActiveEntries`: arrays and a head from hash to newest entry: a dict of ints, or with
the C extension its ``Head``, the same mapping in a C table). A full file is *sealed*: its entries sorted
by (hash, offset) go to a companion file and memory keeps only a sorted array of 32-bit hash prefixes
for it (:mod:`txmq.storage.index_sealed`), so pending messages cost disk, not ~300 bytes of RSS each.

The index is derived: it can be rebuilt from the log (and a companion from its entry file), and a hash
collision is resolved by the caller re-checking the keys of the record it reads. Which keys a record
has is decided by an injected ``IndexKeysFn``.
"""

from __future__ import annotations

import functools
import hashlib
import posixpath
import struct
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from txmq.common import limits
from txmq.common.invariant import invariant
from txmq.storage.api import HeadMap, IndexKeysFn
from txmq.storage.codec import BATCHENC
from txmq.storage.fs import FileHandle, FileSystem
from txmq.storage.index_sealed import ENTRY, ENTRY_BYTES, SORTED_SUFFIX, SealedFile, open_sealed
from txmq.storage.segment import parse_segment_name, segment_name

ENTRIES_PER_FILE = limits.index_entries_per_file
_SMALL_BATCH = limits.index_small_batch


@functools.lru_cache(maxsize=64)
def _entries(count: int) -> struct.Struct:
    """``count`` entries packed by one call (a batch's): each the key's 8-byte digest (the hash as
    stored, big-endian), its offset and the store time packed once (8 bytes): :data:`ENTRY`'s bytes."""
    return struct.Struct(">" + "8sq8s" * count)


_I64 = struct.Struct(">q")


def no_keys(topic: str, properties: bytes) -> list[str]:
    """The default IndexKeysFn: index nothing."""
    return []


_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes


def key_hash(key: str) -> int:
    """The key's hash as the index stores it: blake2b with an 8-byte digest of its UTF-8, big-endian
    (the C extension's blake2b when built: one call, not a hashlib object and its digest call)."""
    if BATCHENC is not None:
        return _from_bytes(BATCHENC.key_digests((key,)), "big")
    return _from_bytes(_blake2b(key.encode(), digest_size=8).digest(), "big")


def key_digests_py(keys: Sequence[str]) -> list[bytes]:
    """Every key's 8-byte digest by hashlib (the reference of ``_batchenc.key_digests``, which
    returns them joined)."""
    return [_blake2b(key.encode(), digest_size=8).digest() for key in keys]


def key_hashes(keys: Sequence[str]) -> list[int]:
    """:func:`key_hash` of every key: the digests joined and read back by one unpack (no
    ``int.from_bytes`` call per key)."""
    joined = b"".join(key_digests_py(keys)) if BATCHENC is None else BATCHENC.key_digests(keys)
    return list(_u64s(len(keys)).unpack(joined))


@functools.lru_cache(maxsize=64)
def _u64s(count: int) -> struct.Struct:
    return struct.Struct(f">{count}Q")


@dataclass(slots=True)
class IndexFile:
    """One entry file: ``handle`` is open while it is active, ``sealed`` is set once it is sealed."""

    sequence: int
    path: str
    handle: FileHandle | None
    sealed: SealedFile | None = None


_NO_PREVIOUS = array("q", (-1,))


def new_head() -> HeadMap:
    """An empty head: the C table (``_batchenc.Head``: no int objects, dict probes or resizes per
    key, ~1k instructions less per indexed key) when the extension is built, else a dict."""
    if BATCHENC is not None:
        head: HeadMap = BATCHENC.Head()
        return head
    return {}


class ActiveEntries:
    """The active file's entries (and buffered ones) without a Python object per entry: parallel
    arrays in log order, each entry linking to the previous entry of its hash, and a head from hash to
    its newest entry (:func:`new_head`). Arrays, a dict of ints and the C head are not tracked by the
    cyclic GC, so its full passes do not walk up to 65,536 lists and tuples (which slowed the broker's
    sends)."""

    __slots__ = ("head", "offsets", "previous", "stamps")

    def __init__(self, data: bytes = b"") -> None:
        self.head: HeadMap = new_head()
        self.offsets = array("q")
        self.stamps = array("q")
        self.previous = array("q")
        for hashed, offset, store_ms in ENTRY.iter_unpack(data):
            self.append(hashed, offset, store_ms)

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, hashed: int, offset: int, store_ms: int) -> bool:
        """Add an entry unless ``hashed`` already has one at or after ``offset`` (same key twice)."""
        previous = self.head.get(hashed, -1)
        if previous >= 0 and self.offsets[previous] >= offset:
            return False
        self.head[hashed] = len(self.offsets)
        self.offsets.append(offset)
        self.stamps.append(store_ms)
        self.previous.append(previous)
        return True

    def extend_new(self, hashes: Sequence[int], offsets: Sequence[int], store_ms: int) -> bool:
        """:meth:`append` of every ``(hash, offset)`` at once when no hash has an entry yet and none
        repeats (a batch's fresh message ids); False, changing nothing, otherwise."""
        head = self.head
        count = len(hashes)
        if len(set(hashes)) != count or any(hashed in head for hashed in hashes):
            return False
        first = len(self.offsets)
        for position, hashed in enumerate(hashes, first):
            head[hashed] = position
        self.offsets.extend(offsets)
        self.stamps.extend(array("q", (store_ms,)) * count)  # one copy, not an iterator step each
        self.previous.extend(_NO_PREVIOUS * count)
        return True

    def extend_digests(self, digests: bytes, offsets: Sequence[int], store_ms: int) -> bool:
        """:meth:`extend_new` of the hashes of ``digests`` (8 bytes each, as ``key_digests`` joins
        them), the head extended by one C call (``_batchenc.head_extend``: the same dict, in the same
        order), with no list of hashes made; only with the C extension."""
        if not BATCHENC.head_extend(self.head, digests, len(self.offsets)):
            return False
        count = len(offsets)
        self.offsets.extend(offsets)
        self.stamps.extend(array("q", (store_ms,)) * count)
        self.previous.extend(_NO_PREVIOUS * count)
        return True

    def newest_first(self, hashed: int) -> Iterator[tuple[int, int]]:
        position = self.head.get(hashed, -1)
        while position >= 0:
            yield self.offsets[position], self.stamps[position]
            position = self.previous[position]


class KeyIndex:
    def __init__(self, fs: FileSystem, directory: str, keys_fn: IndexKeysFn,
                 entries_per_file: int = ENTRIES_PER_FILE) -> None:  # fmt: skip
        invariant(entries_per_file > 0, "an index file holds at least one entry")
        self.fs = fs
        self.directory = directory
        self.keys_fn = keys_fn
        self.entries_per_file = entries_per_file
        self.files: list[IndexFile] = []  # log order; every file but an active last one is sealed
        self.active = ActiveEntries()  # the active file's (and buffered) entries
        self._pending = bytearray()
        self._dirty = False
        self._last_offset = -1  # newest record offset indexed: replays at or below it are skipped
        self._floor = -1  # retire_below's bound: sealed entries below it are not returned

    def load(self) -> None:
        self.fs.makedirs(self.directory)
        names = set(self.fs.list_dir(self.directory))
        for name in sorted(names):
            sequence = parse_segment_name(name)
            if sequence is not None:
                self.files.append(IndexFile(sequence, posixpath.join(self.directory, name), None))
            elif name.removesuffix(".tmp").removesuffix(SORTED_SUFFIX) not in names or name.endswith(".tmp"):
                self.fs.remove(posixpath.join(self.directory, name))  # a companion without its entry file
        self.files.sort(key=lambda file: file.sequence)
        for position, file in enumerate(self.files):
            handle = self.fs.open(file.path)
            if handle.size() % ENTRY_BYTES:
                handle.truncate(handle.size() - handle.size() % ENTRY_BYTES)  # a torn entry
            full = handle.size() >= self.entries_per_file * ENTRY_BYTES
            if position < len(self.files) - 1 or full:
                handle.close()
                file.sealed = open_sealed(self.fs, file.path)
            else:
                file.handle = handle
                self.active = ActiveEntries(handle.read_at(0, handle.size()))
        self._last_offset = self._newest_offset()

    def add(self, topic: str, properties: bytes, physical_offset: int, store_ms: int,
            keys: Sequence[str] | None = None) -> None:  # fmt: skip
        """Buffer entries for one record's keys (call write() after a batch); ``keys``, when given,
        are what ``keys_fn(topic, properties)`` returns (the writer knew them: no decode here)."""
        if physical_offset <= self._last_offset:
            return  # idempotent replay
        self._last_offset = physical_offset
        if keys is None:
            keys = self.keys_fn(topic, properties)
        if BATCHENC is not None:  # one C call: hash, head, arrays and the packed entry of every key
            active = self.active
            BATCHENC.index_add(
                active.head, active.offsets, active.stamps, active.previous, self._pending, keys,
                physical_offset, store_ms,
            )  # fmt: skip
            return
        self._add_keys_py(keys, physical_offset, store_ms)

    @property
    def last_offset(self) -> int:
        """The newest record offset indexed (-1: none): :meth:`add` skips a record at or below it."""
        return self._last_offset

    def add_rows(self, rows: list[Sequence[str]], offsets: list[int], stamps: list[int]) -> None:
        """:meth:`add` of several records whose keys are known (``rows[i]`` at ``offsets[i]``, stored
        at ``stamps[i]``; ascending offsets: the dispatcher's single appends of one group): with the C
        extension one call (``_batchenc.index_add_rows``: the digests four at a time, the arrays and
        the pending entries extended once); record by record (the reference) without it, for a
        replay, or whenever the call declines (it then changed nothing)."""
        if not offsets:
            return
        if BATCHENC is not None and offsets[0] > self._last_offset:
            active = self.active
            if BATCHENC.index_add_rows(
                active.head, active.offsets, active.stamps, active.previous, self._pending, rows, offsets,
                stamps,
            ):  # fmt: skip
                self._last_offset = offsets[-1]
                return
        for keys, offset, store_ms in zip(rows, offsets, stamps, strict=True):
            self.add("", b"", offset, store_ms, keys)

    def _add_keys_py(self, keys: Sequence[str], physical_offset: int, store_ms: int) -> None:
        """The entries of one record's keys, key by key: the reference of ``_batchenc.index_add``."""
        for key in keys:
            hashed = key_hash(key)
            if self.active.append(hashed, physical_offset, store_ms):
                self._pending += ENTRY.pack(hashed, physical_offset, store_ms)

    def add_batch(self, topics: Sequence[str], properties: Sequence[bytes], offsets: Sequence[int],
                  store_ms: int, keys: Sequence[Sequence[str] | None]) -> None:  # fmt: skip
        """:meth:`add` for a batch's records (ascending ``offsets``, one store time): the keys hashed
        in one pass, entries for fresh keys added to memory and packed at once. A replay reaching into
        what is indexed, or a small batch (a transaction's commit: its message and op record), goes
        record by record: the same entries, and for a few keys cheaper than the columnar pass."""
        if offsets[0] <= self._last_offset or len(offsets) <= _SMALL_BATCH:
            for topic, props, offset, given in zip(topics, properties, offsets, keys, strict=True):
                self.add(topic, props, offset, store_ms, given)
            return
        self._last_offset = offsets[-1]
        if BATCHENC is not None and len(topics) == len(properties) == len(offsets):
            # one C call when the writer knew every record's keys and all are fresh (a batch's
            # message ids): hashed, checked, head, arrays and packed entries, as the lines below
            # make them (tests/property/test_index_fresh.py); False, nothing changed, otherwise
            active = self.active
            if BATCHENC.index_add_fresh(
                active.head, active.offsets, active.stamps, active.previous, self._pending, keys, offsets,
                store_ms,
            ):  # fmt: skip
                return
        # one compiled pass: each key with its record's offset (no chain/repeat/map objects per record)
        keys_fn = self.keys_fn
        flat_keys: list[str] = []
        key_offsets: list[int] = []
        for topic, props, offset, given in zip(topics, properties, offsets, keys, strict=True):
            for key in keys_fn(topic, props) if given is None else given:
                flat_keys.append(key)
                key_offsets.append(offset)
        if not flat_keys:
            return
        count = len(flat_keys)
        if BATCHENC is not None:  # the C loops: hash every key, extend the head, pack the entries
            joined: bytes = BATCHENC.key_digests(flat_keys)
            if self.active.extend_digests(joined, key_offsets, store_ms):
                self._pending += BATCHENC.pack_entries(joined, key_offsets, store_ms)
                return
            hashes = list(_u64s(count).unpack(joined))
        else:
            digests = key_digests_py(flat_keys)
            hashes = list(_u64s(count).unpack(b"".join(digests)))
            if self.active.extend_new(hashes, key_offsets, store_ms):
                self._pack_new(digests, key_offsets, store_ms)
                return
        for hashed, offset in zip(hashes, key_offsets, strict=True):
            if self.active.append(hashed, offset, store_ms):
                self._pending += ENTRY.pack(hashed, offset, store_ms)

    def _pack_new(self, digests: list[bytes], key_offsets: list[int], store_ms: int) -> None:
        """The entries of fresh keys, packed by one struct call (the path without the C extension)."""
        # an entry's hash as stored is its digest (big-endian u64) and the store time is one
        # value: both go in as bytes, only the offset is converted per entry
        stamp = _I64.pack(store_ms)
        args: list[object] = []
        for digest, offset in zip(digests, key_offsets, strict=True):
            args.append(digest)
            args.append(offset)
            args.append(stamp)
        self._pending += _entries(len(digests)).pack(*args)

    def write(self) -> None:
        data = memoryview(bytes(self._pending))
        self._pending.clear()
        file_bytes = self.entries_per_file * ENTRY_BYTES
        sealed_any = False
        while data:
            if not self.files or self.files[-1].handle is None:
                self._new_file()
            file = self.files[-1]
            assert file.handle is not None
            room = file_bytes - file.handle.size()
            file.handle.append(data[:room])
            data = data[room:]
            self._dirty = True
            if file.handle.size() >= file_bytes:
                self._seal(file)
                sealed_any = True
        if sealed_any:
            self._reload_active()

    def _new_file(self) -> None:
        sequence = self.files[-1].sequence + 1 if self.files else 0
        path = posixpath.join(self.directory, segment_name(sequence))
        self.files.append(IndexFile(sequence, path, self.fs.open(path)))
        self.fs.sync_dir(self.directory)

    def _seal(self, file: IndexFile) -> None:
        """Make a full file immutable: fsync it, write its sorted companion, drop it from the dict."""
        assert file.handle is not None
        file.handle.sync()
        data = file.handle.read_at(0, file.handle.size())
        file.handle.close()
        file.handle = None
        file.sealed = open_sealed(self.fs, file.path, data)

    def _unseal(self, file: IndexFile) -> None:
        assert file.sealed is not None
        file.sealed.close()
        file.sealed = None
        self.fs.remove(file.path + SORTED_SUFFIX)
        self.fs.sync_dir(self.directory)
        file.handle = self.fs.open(file.path)

    def _reload_active(self) -> None:
        """Rebuild the dict from the active file (empty when the last file is sealed)."""
        self.active = ActiveEntries()
        if self.files and self.files[-1].handle is not None:
            handle = self.files[-1].handle
            self.active = ActiveEntries(handle.read_at(0, handle.size()))

    def _newest_offset(self) -> int:
        for file in reversed(self.files):
            if file.sealed is not None and file.sealed.count:
                return file.sealed.last_offset
            if file.handle is not None and file.handle.size() >= ENTRY_BYTES:
                return int(
                    ENTRY.unpack(file.handle.read_at(file.handle.size() - ENTRY_BYTES, ENTRY_BYTES))[1]
                )
        return -1

    def sync(self) -> None:
        if self._dirty:
            for file in self.files:
                if file.handle is not None:
                    file.handle.sync()
        self._dirty = False

    def take_dirty(self) -> list[str]:
        """The paths :meth:`sync` would sync, for a sync elsewhere (as ``ConsumeQueue.take_dirty``)."""
        if not self._dirty:
            return []
        self._dirty = False
        return [file.path for file in self.files if file.handle is not None]

    def lookup(self, key: str, max_count: int, begin_ms: int, end_ms: int, min_offset: int) -> list[int]:
        """Newest-first log offsets for ``key`` within [begin_ms, end_ms], at most ``max_count``."""
        hashed = key_hash(key)
        floor = max(min_offset, self._floor)
        result: list[int] = []
        if max_count <= 0:
            return result
        for offset, store_ms in self.active.newest_first(hashed):
            if offset < floor:
                return result
            if begin_ms <= store_ms <= end_ms:
                result.append(offset)
                if len(result) >= max_count:
                    return result
        for file in reversed(self.files):
            if file.sealed is None:
                continue
            if file.sealed.last_offset < floor:
                return result
            for offset, store_ms in reversed(file.sealed.matches(hashed)):
                if offset < floor:
                    return result
                if begin_ms <= store_ms <= end_ms:
                    result.append(offset)
                    if len(result) >= max_count:
                        return result
        return result

    def truncate_from_physical(self, physical_offset: int) -> None:
        """Forget entries at or beyond ``physical_offset`` (recovery replays them)."""
        invariant(not self._pending, "truncate only with nothing buffered")
        while self.files:
            file = self.files[-1]
            if file.sealed is not None:
                if file.sealed.last_offset < physical_offset:
                    break
                self._unseal(file)  # a cut inside a sealed file makes it the active one again
            handle = file.handle
            assert handle is not None
            data = handle.read_at(0, handle.size())
            keep = 0
            for keep_index, (_, offset, _) in enumerate(ENTRY.iter_unpack(data)):
                if offset >= physical_offset:
                    break
                keep = keep_index + 1
            if keep * ENTRY_BYTES < len(data):
                handle.truncate(keep * ENTRY_BYTES)
                self._dirty = True
            if keep > 0 or len(self.files) == 1:
                break
            # Empty now (or already: a power cut right after _new_file): the cut may reach further back.
            handle.close()
            self.fs.remove(file.path)
            self.files.pop()
        self._reload_active()
        self._last_offset = self._newest_offset()

    def retire_below(self, log_min_offset: int) -> None:
        """Remove index files (and memory) that only point at deleted segments."""
        while len(self.files) > 1:
            file = self.files[0]
            if file.sealed is not None:
                last = file.sealed.last_offset
            else:
                assert file.handle is not None
                size = file.handle.size()
                last = ENTRY.unpack(file.handle.read_at(size - ENTRY_BYTES, ENTRY_BYTES))[1] if size else -1
            if last >= log_min_offset:
                break
            self._close_file(file)
            self.fs.remove(file.path)
            if self.fs.exists(file.path + SORTED_SUFFIX):
                self.fs.remove(file.path + SORTED_SUFFIX)
            self.files.pop(0)
        self._floor = max(self._floor, log_min_offset)  # active entries below it stay until sealed

    @staticmethod
    def _close_file(file: IndexFile) -> None:
        if file.handle is not None:
            file.handle.close()
        if file.sealed is not None:
            file.sealed.close()

    def close(self) -> None:
        for file in self.files:
            self._close_file(file)
