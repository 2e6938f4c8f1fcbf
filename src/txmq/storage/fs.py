"""The file-system seam: every byte the store reads or writes goes through :class:`FileSystem`.

Two implementations share one protocol so the same store code runs on a real disk and in tests:

* :class:`OsFileSystem`: ``os.*`` calls, ``os.fdatasync`` for durability.
* :class:`FaultyFileSystem`: in memory, deterministic. Per file it keeps the *durable image* (what the
  last successful ``sync`` covered) and the volatile content. Faults: :meth:`lose_unfsynced` (power
  cut), :meth:`crash` (power cut keeping a random prefix of each unsynced tail), :meth:`tear_last_write`,
  :meth:`flip_bit`, :meth:`set_space_left` (ENOSPC after N bytes), :meth:`fail_next_write` and
  :meth:`fail_next_sync` (EIO). Directory operations (create, remove, rename) are durable at once in
  this model; file *contents* are durable only after ``sync``.
"""

from __future__ import annotations

import errno
import os
import posixpath
import random
import time
from dataclasses import dataclass, field
from typing import Protocol

from txmq.common import limits
from txmq.storage.osfile import OsFileHandle as OsFileHandle  # compiled; opened by OsFileSystem


class FileHandle(Protocol):
    """An open file the store appends to and reads from at offsets."""

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data`` at the end; on OSError a prefix may have been written."""
        ...

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data`` at ``offset`` (over existing bytes, or growing the file); on OSError
        a prefix may have been written."""
        ...

    def read_at(self, offset: int, size: int) -> bytes: ...

    def sync(self) -> None: ...

    def truncate(self, size: int) -> None: ...

    def size(self) -> int: ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    def open(self, path: str) -> FileHandle:
        """Open for reading and appending, creating the file if missing."""
        ...

    def list_dir(self, path: str) -> list[str]: ...

    def remove(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None: ...

    def makedirs(self, path: str) -> None: ...

    def remove_dir(self, path: str) -> None:
        """Remove an empty directory."""
        ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def sync_dir(self, path: str) -> None: ...

    def sync_path(self, path: str) -> None:
        """fdatasync the file at ``path`` through a descriptor of its own (the checkpoint does it on
        a worker thread while the loop keeps writing the file through its handle); a file removed
        meanwhile is skipped."""
        ...

    def free_bytes(self, path: str) -> int | None:
        """Space left for new data on the file system holding ``path`` (None: unknown, unlimited)."""
        ...


# --------------------------------------------------------------------------------------------- real


class OsFileSystem:
    """The real disk."""

    def __init__(self) -> None:
        # per directory: the last ample free-space reading and when it was taken (monotonic ns)
        self._ample: dict[str, tuple[int, int]] = {}

    def open(self, path: str) -> FileHandle:
        return OsFileHandle(path)

    def list_dir(self, path: str) -> list[str]:
        return sorted(os.listdir(path)) if os.path.isdir(path) else []

    def remove(self, path: str) -> None:
        os.remove(path)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove_dir(self, path: str) -> None:
        os.rmdir(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync_path(self, path: str) -> None:
        # fdatasync acts on the file, not the descriptor: the pages the loop's handle wrote are covered
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return  # retired meanwhile: nothing of it is needed any more
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def free_bytes(self, path: str) -> int | None:
        """A reading of at least ``limits.disk_free_ample_bytes`` stands for
        ``limits.disk_free_ample_ms``: a group commit writing over prepared space asks once per group
        (a ``statfs`` each, ~3.5 µs with the result's object), and no group comes near that much
        space; below it, or once it is older, every call reads the file system again."""
        now = time.monotonic_ns()
        ample = self._ample.get(path)
        if ample is not None and now - ample[1] < limits.disk_free_ample_ms * 1_000_000:
            return ample[0]
        stat = os.statvfs(path)
        # what an unprivileged writer may take: never more than a write of ours can (root may be
        # allowed the reserved blocks too; then this refuses early, which is the safe side)
        free = stat.f_bavail * stat.f_frsize
        if free >= limits.disk_free_ample_bytes:
            self._ample[path] = (free, now)
        elif ample is not None:
            del self._ample[path]
        return free


# ------------------------------------------------------------------------------------------- faulty

SECTOR_BYTES = 512  # what a power cut keeps or loses whole, in FaultyFileSystem.crash


@dataclass
class MemFile:
    """One in-memory file: volatile ``data`` and the ``durable`` image of the last successful sync."""

    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""
    last_write: tuple[int, int] | None = None  # (start, length) of the most recent write
    last_overwritten: bytes = b""  # the bytes the most recent write replaced (b"" for an append)


class FaultyFileHandle:
    __slots__ = ("_file", "_fs", "path")

    def __init__(self, fs: FaultyFileSystem, path: str, file: MemFile) -> None:
        self._fs = fs
        self._file = file
        self.path = path

    def append(self, data: bytes | bytearray | memoryview) -> None:
        self._fs.before_write(len(data), self.path)
        allowed = self._fs.take_space(len(data))
        start = len(self._file.data)
        self._file.data += bytes(data[:allowed])
        self._file.last_write = (start, allowed)
        self._file.last_overwritten = b""
        if allowed < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Overwriting takes no space (it is allocated); only growing the file does."""
        self._fs.before_write(len(data), self.path)
        file = self._file
        size = len(file.data)
        if offset > size:  # a hole reads as zeros
            file.data += bytes(offset - size)
            size = offset
        growth = max(0, offset + len(data) - size)
        allowed = len(data) - growth + self._fs.take_space(growth)
        file.last_overwritten = bytes(file.data[offset : offset + allowed])
        file.data[offset : offset + allowed] = bytes(data[:allowed])
        file.last_write = (offset, allowed)
        if allowed < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)

    def read_at(self, offset: int, size: int) -> bytes:
        return bytes(self._file.data[offset : offset + size])

    def sync(self) -> None:
        self._fs.before_sync()
        self._file.durable = bytes(self._file.data)

    def truncate(self, size: int) -> None:
        if size < len(self._file.data):
            self._fs.give_space(len(self._file.data) - size)
            del self._file.data[size:]
        else:
            self._file.data += bytes(size - len(self._file.data))

    def size(self) -> int:
        return len(self._file.data)

    def close(self) -> None:
        return None


class FaultyFileSystem:
    """A deterministic in-memory file system with fault injection (see the module docstring)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.files: dict[str, MemFile] = {}
        self.dirs: set[str] = {"/"}
        self.rng = rng if rng is not None else random.Random(0)
        self.space_left: int | None = None
        self._write_errors: list[tuple[int, str]] = []  # (errno, path prefix it applies to)
        self._sync_errors: list[int] = []
        self.syncs = 0

    # -- protocol
    def open(self, path: str) -> FileHandle:
        path = posixpath.normpath(path)
        parent = posixpath.dirname(path)
        if parent not in self.dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", parent)
        file = self.files.setdefault(path, MemFile())
        return FaultyFileHandle(self, path, file)

    def list_dir(self, path: str) -> list[str]:
        path = posixpath.normpath(path)
        names = {
            posixpath.relpath(p, path).split("/")[0]
            for p in [*self.files, *self.dirs]
            if p != path and p.startswith(path.rstrip("/") + "/")
        }
        return sorted(names)

    def remove(self, path: str) -> None:
        path = posixpath.normpath(path)
        if path not in self.files:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        self.give_space(len(self.files.pop(path).data))

    def rename(self, source: str, target: str) -> None:
        source, target = posixpath.normpath(source), posixpath.normpath(target)
        if source not in self.files:
            raise FileNotFoundError(errno.ENOENT, "no such file", source)
        self.files[target] = self.files.pop(source)

    def makedirs(self, path: str) -> None:
        path = posixpath.normpath(path)
        while path not in self.dirs:
            self.dirs.add(path)
            path = posixpath.dirname(path)

    def remove_dir(self, path: str) -> None:
        path = posixpath.normpath(path)
        if self.list_dir(path):
            raise OSError(errno.ENOTEMPTY, "directory not empty", path)
        self.dirs.discard(path)

    def exists(self, path: str) -> bool:
        path = posixpath.normpath(path)
        return path in self.files or path in self.dirs

    def is_dir(self, path: str) -> bool:
        return posixpath.normpath(path) in self.dirs

    def sync_dir(self, path: str) -> None:
        self.before_sync()

    def sync_path(self, path: str) -> None:
        file = self.files.get(posixpath.normpath(path))
        if file is not None:
            self.before_sync()
            file.durable = bytes(file.data)

    def free_bytes(self, path: str) -> int | None:
        return self.space_left

    # -- fault hooks used by the handles
    def before_write(self, size: int, path: str = "") -> None:
        if self._write_errors and path.startswith(self._write_errors[0][1]):
            raise OSError(self._write_errors.pop(0)[0], "injected write error")

    def before_sync(self) -> None:
        self.syncs += 1
        if self._sync_errors:
            raise OSError(self._sync_errors.pop(0), "injected fsync error")

    def take_space(self, size: int) -> int:
        if self.space_left is None:
            return size
        allowed = min(size, self.space_left)
        self.space_left -= allowed
        return allowed

    def give_space(self, size: int) -> None:
        if self.space_left is not None:
            self.space_left += size

    # -- faults
    def set_space_left(self, size: int | None) -> None:
        """Writes beyond ``size`` more bytes fail with ENOSPC (``None``: unlimited)."""
        self.space_left = size

    def fail_next_write(self, code: int = errno.EIO, path_prefix: str = "") -> None:
        """The next write (to a file whose path starts with ``path_prefix``) fails with ``code``."""
        self._write_errors.append((code, posixpath.normpath(path_prefix) if path_prefix else ""))

    def fail_next_sync(self, code: int = errno.EIO) -> None:
        self._sync_errors.append(code)

    def lose_unfsynced(self) -> None:
        """Power cut: every file falls back to its durable image."""
        for file in self.files.values():
            file.data = bytearray(file.durable)
            file.last_write = None

    def crash(self) -> None:
        """Power cut where each file keeps its durable image plus a random prefix of what followed.

        A file whose unsynced writes went over bytes it already had (a preallocated CommitLog
        segment) keeps a random prefix of its new length and, in it, a random subset of the
        512-byte sectors that changed: the disk writes sectors back in any order."""
        for file in self.files.values():
            durable_len = len(file.durable)
            if file.data[:durable_len] == file.durable and len(file.data) > durable_len:
                keep = self.rng.randint(durable_len, len(file.data))
                file.data = file.data[:keep]
            elif len(file.data) >= durable_len and file.data != file.durable:
                keep = self.rng.randint(durable_len, len(file.data))
                old = file.durable + bytes(keep - durable_len)
                new = file.data[:keep]
                merged = bytearray(old)
                for start in range(0, keep, SECTOR_BYTES):
                    end = min(start + SECTOR_BYTES, keep)
                    if new[start:end] != old[start:end] and self.rng.random() < 0.5:
                        merged[start:end] = new[start:end]
                file.data = merged
            else:
                file.data = bytearray(file.durable)
            file.durable = bytes(file.data)
            file.last_write = None

    def tear_last_write(self, path: str, keep_bytes: int) -> None:
        """Keep only ``keep_bytes`` of the most recent append to ``path`` (volatile and durable)."""
        file = self.files[posixpath.normpath(path)]
        if file.last_write is None:
            raise ValueError(f"no write to tear in {path}")
        start, length = file.last_write
        end = start + min(keep_bytes, length)
        if file.last_overwritten:  # a write over existing bytes: the rest of it keeps the old ones
            kept = end - start
            file.data[end : start + len(file.last_overwritten)] = file.last_overwritten[kept:]
            del file.data[max(start + len(file.last_overwritten), end) :]
            file.durable = bytes(file.data)
            return
        del file.data[end:]
        file.durable = file.durable[:end]

    def flip_bit(self, path: str, byte_offset: int, bit: int = 0) -> None:
        """Flip one bit in both the volatile content and the durable image (bit rot)."""
        file = self.files[posixpath.normpath(path)]
        file.data[byte_offset] ^= 1 << bit
        if byte_offset < len(file.durable):
            durable = bytearray(file.durable)
            durable[byte_offset] ^= 1 << bit
            file.durable = bytes(durable)

    def read_file(self, path: str) -> bytes:
        return bytes(self.files[posixpath.normpath(path)].data)
