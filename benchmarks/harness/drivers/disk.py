"""The disk itself as a "system": write + fdatasync group commit of the payloads, no broker, no network.

A reference row for issue 8's last goal (txmq's group-commit appends vs the raw disk, measured in the
same run). ``send`` queues the payloads and waits; one committer thread takes everything queued, writes
it with one ``os.write`` and calls ``os.fdatasync``, then releases every sender it covered. This is the
best an asyncio server could do with one log file and group commit, so a broker's figure divided by
this one shows how much of the disk's durable rate it delivers (its network and Python costs included).
It runs inside the harness process: there is no server CPU to report.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness.driver import Consumer, DriverInfo, Producer
from benchmarks.harness.workload import Workload


class _GroupCommitLog:
    """A file and its committer thread; ``append`` returns once an fdatasync covered the bytes."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Condition()
        self._pending: list[tuple[bytes, asyncio.Future[None]]] = []
        self._closed = False
        self.commits = 0
        self._thread = threading.Thread(target=self._run, name="disk-group-commit", daemon=True)
        self._thread.start()

    async def append(self, records: Sequence[bytes]) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        data = b"".join(records)
        with self._lock:
            self._pending.append((data, future))
            self._lock.notify()
        await future

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait()
                if self._closed and not self._pending:
                    return
                batch, self._pending = self._pending, []
            os.write(self._fd, b"".join(data for data, _ in batch))
            os.fdatasync(self._fd)
            self.commits += 1
            for _, future in batch:
                future.get_loop().call_soon_threadsafe(_resolve, future)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join()
        os.close(self._fd)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _DiskProducer:
    def __init__(self, log: _GroupCommitLog) -> None:
        self._log = log

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        await self._log.append(payloads)

    async def close(self) -> None:
        return None


class DiskGroupCommitDriver:
    def __init__(self) -> None:
        self._dir: Path | None = None
        self._log: _GroupCommitLog | None = None

    def describe(self) -> DriverInfo:
        return DriverInfo(
            system="disk-groupcommit",
            product="the raw disk: one file, write + fdatasync group commit (a thread), no broker",
            client="in the harness process (asyncio senders, one committer thread)",
            durability="released after the fdatasync covering the bytes",
            fsync_before_ack=True,
        )

    def supports(self, workload: Workload) -> str | None:
        if workload.consumers:
            return "a log file has no consumers (produce-only reference)"
        return None

    async def setup(self, workload: Workload) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="bench-disk-"))
        self._log = _GroupCommitLog(self._dir / "log.bin")

    async def producer(self, index: int) -> Producer:
        assert self._log is not None
        return _DiskProducer(self._log)

    async def consumer(self, index: int, queues: Sequence[int]) -> Consumer:
        raise NotImplementedError("supports() excludes consume workloads")

    def server_pids(self) -> list[int]:
        return []

    async def teardown(self) -> None:
        if self._log is not None:
            await asyncio.to_thread(self._log.close)
            self._log = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
