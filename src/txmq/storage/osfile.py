"""The real disk's open file (:class:`OsFileHandle`), compiled with mypyc: the store asks a handle its
size and appends to it several times per group commit, and an interpreted call costs more than the
work. ``storage.fs`` re-exports it beside :class:`OsFileSystem`, which opens it."""

from __future__ import annotations

import os
from typing import Final

_PWRITE: Final = os.pwrite  # bound once: compiled code calls it from a C static


class OsFileHandle:
    """A file descriptor opened ``O_RDWR``; the size is tracked to avoid ``fstat`` calls, and an
    append is a ``pwrite`` at it (no ``O_APPEND``, which would make :meth:`write_at` append too).
    One handle per file writes it (the store is its files' only writer)."""

    __slots__ = ("_fd", "_size", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size

    def append(self, data: bytes | bytearray | memoryview) -> None:
        self.write_at(self._size, data)

    def write_at(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            written = _PWRITE(self._fd, view, offset)
            offset += written
            if offset > self._size:
                self._size = offset
            view = view[written:]

    def read_at(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
