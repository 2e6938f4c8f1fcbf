"""One process per store directory: an exclusive advisory lock (``flock``) on ``<store dir>/lock``.

Two brokers on one data directory both appended to the same CommitLog (each from its own idea of the
tail), and ``txmq store repair`` could truncate a log a running broker was writing. The lock is taken
before the store is opened and released at close; the kernel drops it when the process dies (kill -9
included), so a crash never leaves a stale lock. The file holds the owner's pid, for the message only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from txmq.common import errors

LOCK_FILE = "lock"


class StoreLock:
    def __init__(self, fd: int, path: str) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, store_dir: str) -> StoreLock:
        """Lock ``store_dir`` (created if missing) or raise StorageError naming the process using it."""
        os.makedirs(store_dir, exist_ok=True)
        path = os.path.join(store_dir, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise errors.StorageError(
                f"the store {store_dir} is in use by another txmq process (pid {holder}); stop it first"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return cls(fd, path)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
