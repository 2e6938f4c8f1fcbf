"""Disk faults for the simulation: a crash at the N-th write or fsync, and a power cut that may tear
or corrupt only what was never fsynced.

:class:`CrashingFileSystem` is a :class:`FaultyFileSystem` that raises :class:`SimulatedCrash` (a
``BaseException``, so no ``except Exception`` in broker code can swallow it) at a chosen write or
fsync: the broker process "dies" in the middle of whatever it was doing.
"""

from __future__ import annotations

import random

from txmq.storage.fs import FaultyFileSystem


class SimulatedCrash(BaseException):
    """The simulated broker process died at a write or an fsync."""


class CrashingFileSystem(FaultyFileSystem):
    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.crash_countdown: int | None = None  # writes + fsyncs left before the crash

    def arm(self, operations: int) -> None:
        """Crash at the ``operations``-th write or fsync from now (1 = the next one)."""
        assert operations >= 1
        self.crash_countdown = operations

    def _tick(self, what: str) -> None:
        if self.crash_countdown is None:
            return
        self.crash_countdown -= 1
        if self.crash_countdown <= 0:
            self.crash_countdown = None
            raise SimulatedCrash(f"crash at a {what}")

    def before_write(self, size: int, path: str = "") -> None:
        self._tick("write")
        super().before_write(size, path)

    def before_sync(self) -> None:
        self._tick("fsync")
        super().before_sync()

    def clear_injected_errors(self) -> None:
        self.crash_countdown = None
        self._write_errors.clear()
        self._sync_errors.clear()

    def heal(self) -> None:
        """Forget pending injected errors and the space limit (the operator fixed the disk)."""
        self.clear_injected_errors()
        self.set_space_left(None)

    def power_cut(self, mode: str) -> list[str]:
        """Lose what was not fsynced. ``lose``: back to the durable images. ``torn``: each file keeps
        a random prefix of its unsynced tail. ``flip``: torn, then one bit flipped in a kept byte that
        was never fsynced (so no acknowledged byte is touched). Returns what was done, for the log."""
        if mode == "lose":
            self.lose_unfsynced()
            return ["lose_unfsynced"]
        synced = {path: f.durable for path, f in self.files.items()}
        self.crash()
        done = ["torn_tails"]
        if mode == "flip":
            for path in sorted(self.files):
                file = self.files[path]
                old = synced.get(path, b"")
                start = len(old)
                if len(file.data) > start and file.data[:start] == file.durable[:start]:
                    offset = self.rng.randrange(start, len(file.data))
                    self.flip_bit(path, offset, self.rng.randrange(8))
                    done.append(f"flip {path}@{offset}")
                elif len(file.data) == start and file.data != old:  # unsynced writes over old bytes
                    offset = self._changed_byte(file.data, old)
                    self.flip_bit(path, offset, self.rng.randrange(8))
                    done.append(f"flip {path}@{offset}")
        return done

    def _changed_byte(self, data: bytearray, old: bytes) -> int:
        """A random position where ``data`` differs from ``old`` (same length): a kept unsynced byte."""
        sectors = [at for at in range(0, len(old), 512) if data[at : at + 512] != old[at : at + 512]]
        at = self.rng.choice(sectors)
        return self.rng.choice([i for i in range(at, min(at + 512, len(old))) if data[i] != old[i]])
