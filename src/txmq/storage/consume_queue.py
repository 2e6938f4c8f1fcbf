"""ConsumeQueues: per (topic, queue id) files of fixed 20-byte units derived from the CommitLog.

One unit (big-endian)::

    +---------------------------+----------+---------------------------+
    | commit-log offset  i64    | size i32 | tags code  i64            |
    +---------------------------+----------+---------------------------+
    0                           8          12                          20

Files live in ``consumequeue/<topic>/<queue id>/`` and are named by the 20-digit queue offset of
their first unit; a file holds ``units_per_file`` units. ``put`` is idempotent (a unit whose log
offset is not beyond the last one is skipped), so recovery may replay the log over a queue.
"""

from __future__ import annotations

import functools
import posixpath
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final

from txmq.common.errors import CorruptRecord
from txmq.common.invariant import invariant
from txmq.storage.api import QueueUnit
from txmq.storage.codec import BATCHENC
from txmq.storage.fs import FileHandle, FileSystem
from txmq.storage.segment import parse_segment_name, segment_name

UNIT: Final = struct.Struct(">qiq")
UNIT_BYTES: Final = 20  # UNIT.size; Final: compiled code reads a constant, not the module's dict
assert UNIT.size == UNIT_BYTES
# the C call that appends one unit in place (no bytes object), bound once: compiled code then calls
# it directly instead of looking the name up on the extension module at every put
_PUT_UNIT: Final[Any] = None if BATCHENC is None else BATCHENC.put_unit


@functools.lru_cache(maxsize=64)
def _units(count: int) -> struct.Struct:
    """``count`` units packed by one call (a batch's)."""
    return struct.Struct(">" + "qiq" * count)


def pack_units(offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int]) -> bytes:
    """The units of every record but the first (``put_run`` puts that one itself): one C call with
    the store's C extension, else one struct pack (the reference, :func:`pack_units_py`)."""
    if BATCHENC is not None:
        units: bytes = BATCHENC.pack_units(offsets, sizes, tags_codes, 1)
        return units
    return pack_units_py(offsets, sizes, tags_codes)


def pack_units_py(offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int]) -> bytes:
    """:func:`pack_units` in Python."""
    return _units(len(offsets) - 1).pack(
        *chain.from_iterable(zip(offsets[1:], sizes[1:], tags_codes[1:], strict=True))
    )


@dataclass(slots=True)
class _File:
    base: int  # queue offset of the first unit
    path: str
    handle: FileHandle

    @property
    def count(self) -> int:
        return self.handle.size() // UNIT_BYTES


class ConsumeQueue:
    def __init__(
        self, fs: FileSystem, directory: str, units_per_file: int, topic: str = "", queue_id: int = 0
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.units_per_file = units_per_file
        self.topic = topic  # the queue's name (ConsumeQueueSet gives it; the dispatcher's listeners read it)
        self.queue_id = queue_id
        self.files: list[_File] = []
        self.min_offset = 0  # first readable queue offset (moves up with retention)
        self.max_physical_offset = -1  # log offset of the last unit, -1 when empty
        self._pending = bytearray()
        self._dirty: set[str] = set()
        # max_offset, kept by put/put_run (each adds units right after it) so the dispatcher's put
        # asks no file handle its size; -1: unknown, computed from the files at the next read. Every
        # other change of the files, the buffer or min_offset sets it to -1 (_forget_next).
        self._next = -1

    # -- loading and recovery
    def load(self) -> None:
        for name in self.fs.list_dir(self.directory):
            base = parse_segment_name(name)
            if base is not None:
                path = posixpath.join(self.directory, name)
                self.files.append(_File(base, path, self.fs.open(path)))
        self.files.sort(key=lambda f: f.base)
        for file in self.files:
            size = file.handle.size()
            if size % UNIT_BYTES:
                file.handle.truncate(size - size % UNIT_BYTES)  # a torn unit (any unsynced file may tear)
        # A file short of full with newer files after it means a crash lost unsynced units in the middle:
        # everything after the gap is newer than the checkpoint (checkpoints sync every file) and is
        # rebuilt from the CommitLog, so drop it rather than serve a queue with a hole.
        for index, file in enumerate(self.files[:-1]):
            if file.count < self.units_per_file:
                while len(self.files) > index + 1:
                    self._drop_last_file()
                break
        if self.files:
            self.min_offset = self.files[0].base
        self._forget_next()
        self._refresh_max_physical()

    @property
    def max_offset(self) -> int:
        """The next queue offset (one past the last unit)."""
        next_offset = self._next
        if next_offset < 0:
            next_offset = self._next = self._max_offset_of_files()
        return next_offset

    def _max_offset_of_files(self) -> int:
        """:attr:`max_offset` from the files and the buffer (the reference the kept value equals)."""
        files = self.files
        if not files:
            return self.min_offset
        last = files[-1]  # its count read once (a handle size call), not through the property twice
        return last.base + last.handle.size() // UNIT_BYTES + len(self._pending) // UNIT_BYTES

    def _forget_next(self) -> None:
        """The files, the buffer or min_offset changed other than by a put: recompute max_offset."""
        self._next = -1

    def _refresh_max_physical(self) -> None:
        while self.files and self.files[-1].count == 0 and len(self.files) > 1:
            self._drop_last_file()
        if self.files and self.files[-1].count:
            last = self.files[-1]
            self.max_physical_offset = UNIT.unpack(last.handle.read_at((last.count - 1) * UNIT_BYTES, 20))[0]
        else:
            self.max_physical_offset = -1

    def _drop_last_file(self) -> None:
        self._forget_next()
        dropped = self.files.pop()
        dropped.handle.close()
        self.fs.remove(dropped.path)

    def truncate_from_physical(self, physical_offset: int) -> int:
        """Drop every unit whose log offset is >= ``physical_offset``; returns units dropped."""
        invariant(not self._pending, "truncate only with nothing buffered")
        dropped = 0
        while self.files and self.max_physical_offset >= physical_offset:
            last = self.files[-1]
            keep = self._first_unit_at_or_after(last, physical_offset)
            dropped += last.count - keep
            if keep == 0 and len(self.files) > 1:
                self._drop_last_file()
            else:
                last.handle.truncate(keep * UNIT_BYTES)
                self._dirty.add(last.path)
                self._forget_next()
            self._refresh_max_physical()
        self.min_offset = min(self.min_offset, self.max_offset)
        self._forget_next()
        return dropped

    def discard_pending(self) -> None:
        """Forget buffered units and any partial unit a failed write left (dispatch failed)."""
        self._pending.clear()
        self._forget_next()
        if self.files:
            last = self.files[-1]
            partial = last.handle.size() % UNIT_BYTES
            if partial:
                try:
                    last.handle.truncate(last.handle.size() - partial)
                except OSError:
                    pass  # the store is fenced; recovery cuts a torn unit at the next open
        self._refresh_max_physical()

    def drop_last_unit(self) -> None:
        """Remove the last unit (recovery cutting a tail that was never fsynced and holds garbage)."""
        invariant(not self._pending, "truncate only with nothing buffered")
        invariant(bool(self.files) and self.files[-1].count > 0, "a unit to drop exists")
        last = self.files[-1]
        last.handle.truncate((last.count - 1) * UNIT_BYTES)
        self._dirty.add(last.path)
        self._forget_next()
        self._refresh_max_physical()
        self.min_offset = min(self.min_offset, self.max_offset)
        self._forget_next()

    def _first_unit_at_or_after(self, file: _File, physical_offset: int) -> int:
        low, high = 0, file.count
        while low < high:
            mid = (low + high) // 2
            if self._unit_physical(file, mid) < physical_offset:
                low = mid + 1
            else:
                high = mid
        return low

    @staticmethod
    def _unit_physical(file: _File, index: int) -> int:
        return int(UNIT.unpack(file.handle.read_at(index * UNIT_BYTES, UNIT_BYTES))[0])

    # -- writing
    def put(self, queue_offset: int, physical_offset: int, size: int, tags_code: int) -> bool:
        """Buffer one unit; False if already present (idempotent replay). Call write() after."""
        if physical_offset <= self.max_physical_offset:
            return False
        expected = self.max_offset
        if not self.files and not self._pending and queue_offset != expected:
            self.min_offset = queue_offset  # the queue starts later (older units were retired)
            self._forget_next()
        elif queue_offset != expected:
            raise CorruptRecord(
                f"{self.directory}: record at log offset {physical_offset} has queue offset "
                f"{queue_offset}, expected {expected} (ConsumeQueue out of step with the log)",
                offset=physical_offset,
            )
        if not self.files and not self._pending:
            self._new_file(queue_offset)
        if _PUT_UNIT is not None:  # the unit appended in place by one C call (no bytes object)
            _PUT_UNIT(self._pending, physical_offset, size, tags_code)
        else:
            self._pending += UNIT.pack(physical_offset, size, tags_code)
        self.max_physical_offset = physical_offset
        self._next = queue_offset + 1
        return True

    def put_run(
        self, queue_offset: int, offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int]
    ) -> bool:
        """:meth:`put` for consecutive queue offsets from ``queue_offset`` (a batch's records in one
        queue, ascending log offsets): one pack for every unit. False if none was new."""
        if offsets[0] <= self.max_physical_offset:  # a replay reaching into what is there: unit by unit
            added = False
            for i, (offset, size, tags_code) in enumerate(zip(offsets, sizes, tags_codes, strict=True)):
                added = self.put(queue_offset + i, offset, size, tags_code) or added
            return added
        if not self.put(queue_offset, offsets[0], sizes[0], tags_codes[0]):
            return False  # pragma: no cover - the offset check above already holds
        count = len(offsets)
        if count > 1:
            self._pending += pack_units(offsets, sizes, tags_codes)
            self.max_physical_offset = offsets[-1]
            self._next = queue_offset + count
        return True

    def _new_file(self, base: int) -> None:
        self._forget_next()
        self.fs.makedirs(self.directory)
        path = posixpath.join(self.directory, segment_name(base))
        self.files.append(_File(base, path, self.fs.open(path)))
        self.fs.sync_dir(self.directory)

    def write(self) -> None:
        """Write buffered units, rolling files as they fill (max_offset stays what it is; a failed
        write forgets it: the caller discards the buffer, and the files then tell)."""
        try:
            self._write()
        except BaseException:
            self._forget_next()
            raise

    def _write(self) -> None:
        pending = self._pending
        if not pending:
            return
        last = self.files[-1]
        next_offset = self._next
        # the usual case, without asking the handle its size: the file's units and the buffer's fit it
        if next_offset >= 0 and next_offset - last.base <= self.units_per_file:
            units = bytes(pending)
            pending.clear()
            last.handle.append(units)
            self._dirty.add(last.path)
            return
        data = memoryview(bytes(pending))
        pending.clear()
        while data:
            last = self.files[-1]
            room = (self.units_per_file - last.count) * UNIT_BYTES
            if room == 0:
                self._new_file(last.base + last.count)
                continue
            last.handle.append(data[:room])
            self._dirty.add(last.path)
            data = data[room:]

    def sync(self) -> None:
        for file in self.files:
            if file.path in self._dirty:
                file.handle.sync()
        self._dirty.clear()

    def take_dirty(self) -> list[str]:
        """The paths :meth:`sync` would sync, for a sync elsewhere (``FileSystem.sync_path``, on the
        checkpoint's thread); they count as synced from now on (the caller fences if it fails)."""
        paths = [file.path for file in self.files if file.path in self._dirty]
        self._dirty.clear()
        return paths

    # -- reading
    def units(self, queue_offset: int, max_count: int) -> list[QueueUnit]:
        invariant(not self._pending, "read only with nothing buffered")
        result: list[QueueUnit] = []
        offset = max(queue_offset, self.min_offset)
        for file in self._files_from(offset):
            index = offset - file.base
            count = min(file.count - index, max_count - len(result))
            if count <= 0:
                break
            data = file.handle.read_at(index * UNIT_BYTES, count * UNIT_BYTES)
            for i, (phys, size, tags) in enumerate(UNIT.iter_unpack(data)):
                result.append(QueueUnit(offset + i, phys, size, tags))
            offset += count
        return result

    def raw_units(self, queue_offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """``(physical_offset, size, tags_code)`` of up to ``max_count`` units from ``queue_offset``
        (the units of :meth:`units` without their objects; the pull path reads these)."""
        invariant(not self._pending, "read only with nothing buffered")
        offset = max(queue_offset, self.min_offset)
        for i, file in enumerate(self.files):  # noqa: B007 - i is used after the loop
            if offset < file.base + file.count:
                break
        else:
            return []
        index = offset - file.base
        count = min(file.count - index, max_count)
        if count <= 0:
            return []
        result = list(UNIT.iter_unpack(file.handle.read_at(index * UNIT_BYTES, count * UNIT_BYTES)))
        if count < max_count and i + 1 < len(self.files):  # the run crosses into the next file
            result += self.raw_units(offset + count, max_count - count)
        return result

    def rewrite_unit(self, queue_offset: int, physical_offset: int, size: int, tags_code: int) -> None:
        """Overwrite the unit at ``queue_offset`` in place and sync its file: a damaged unit rebuilt
        from its record in the log (the only truth)."""
        invariant(not self._pending, "rewrite only with nothing buffered")
        for file in self.files:
            if file.base <= queue_offset < file.base + file.count:
                file.handle.write_at(
                    (queue_offset - file.base) * UNIT_BYTES, UNIT.pack(physical_offset, size, tags_code)
                )
                file.handle.sync()
                break
        else:
            invariant(False, f"a unit at queue offset {queue_offset} exists")
        self._refresh_max_physical()

    def _files_from(self, queue_offset: int) -> list[_File]:
        for i, file in enumerate(self.files):
            if queue_offset < file.base + file.count:
                return self.files[i:]
        return []

    def offset_by_time(self, timestamp_ms: int, store_ms_of: Callable[[int], int]) -> int:
        """First queue offset whose record's store time is >= ``timestamp_ms`` (max offset if none)."""
        low, high = self.min_offset, self.max_offset
        while low < high:
            mid = (low + high) // 2
            unit = self.units(mid, 1)[0]
            if store_ms_of(unit.physical_offset) < timestamp_ms:
                low = mid + 1
            else:
                high = mid
        return low

    def retire_below(self, log_min_offset: int) -> None:
        """Advance min_offset past units whose records were deleted; remove fully retired files. A
        negative log offset is a damaged unit (a flipped sign bit), never a retired one: it retires
        nothing (the read that reaches it rebuilds it from the log)."""
        while len(self.files) > 1 and 0 <= self._unit_physical(self.files[1], 0) < log_min_offset:
            first = self.files.pop(0)
            first.handle.close()
            self.fs.remove(first.path)
            self._forget_next()
        low, high = max(self.min_offset, self.files[0].base if self.files else 0), self.max_offset
        while low < high:
            mid = (low + high) // 2
            if 0 <= self.units(mid, 1)[0].physical_offset < log_min_offset:
                low = mid + 1
            else:
                high = mid
        self.min_offset = low
        self._forget_next()

    def close(self) -> None:
        for file in self.files:
            file.handle.close()


class ConsumeQueueSet:
    """Every ConsumeQueue under ``<data_dir>/consumequeue``, created on first put."""

    def __init__(self, fs: FileSystem, directory: str, units_per_file: int) -> None:
        self.fs = fs
        self.directory = directory
        self.units_per_file = units_per_file
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        # the same queues by topic, then queue id: get_or_create builds no (topic, queue id) tuple
        self._by_topic: dict[str, dict[int, ConsumeQueue]] = {}

    def load(self) -> None:
        self.fs.makedirs(self.directory)
        for topic in self.fs.list_dir(self.directory):
            topic_dir = posixpath.join(self.directory, topic)
            for queue_name in self.fs.list_dir(topic_dir):
                if queue_name.isdecimal():
                    queue = self._make(topic, int(queue_name))
                    queue.load()

    def _make(self, topic: str, queue_id: int) -> ConsumeQueue:
        path = posixpath.join(self.directory, topic, str(queue_id))
        queue = ConsumeQueue(self.fs, path, self.units_per_file, topic, queue_id)
        self.queues[(topic, queue_id)] = queue
        by_id = self._by_topic.get(topic)
        if by_id is None:
            by_id = self._by_topic[topic] = {}
        by_id[queue_id] = queue
        return queue

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        by_id = self._by_topic.get(topic)
        if by_id is not None:
            queue = by_id.get(queue_id)
            if queue is not None:
                return queue
        return self._make(topic, queue_id)

    def sync(self) -> None:
        for queue in self.queues.values():
            queue.sync()

    def take_dirty(self) -> list[str]:
        """Every queue's :meth:`ConsumeQueue.take_dirty`."""
        paths: list[str] = []
        for queue in self.queues.values():
            paths += queue.take_dirty()
        return paths

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()
