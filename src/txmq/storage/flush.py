"""Group commit: one write and one fdatasync cover every append buffered before the flush started.

Appends in SYNC mode register a future resolved once ``flushed_offset`` reaches their end offset.
One flusher task writes the CommitLog's buffered group (one ``write``), takes the dirty segments,
fsyncs them in a worker thread (so the event loop keeps accepting appends, which form the next
group), then resolves every covered waiter. A failed fsync fences the store: the waiters and every
later write fail with StoreFenced; fsync is never retried, because after a failed fsync the kernel
may already have dropped the dirty pages. A write that fails with ENOSPC fails only its own group
(rolled back by the CommitLog); the store keeps serving.

In ASYNC mode (``ack_on_write``) the open group is written at the end of the event-loop turn that
opened it, dispatched, and acknowledged; fsync happens every flush interval.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from txmq.common.errors import DiskFull, StorageError, StoreFenced
from txmq.common.invariant import invariant
from txmq.storage.commitlog import CommitLog
from txmq.storage.segment import Segment


class Done:
    """An awaitable that is already complete (ASYNC-mode acks, already-durable records)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


DONE = Done()


class GroupCommit:
    """Appends share one future per group: the *open* group collects appends until the flusher
    takes it (fixing its target offset); a taken group resolves when its fsync returns."""

    def __init__(self, log: CommitLog, flushed_offset: int, *, ack_on_write: bool = False) -> None:
        self.log = log
        self.flushed_offset = flushed_offset
        self.flush_count = 0  # group commits completed (for benchmarks and metrics)
        self.ack_on_write = ack_on_write
        self._taken: deque[tuple[int, asyncio.Future[None]]] = deque()  # (target offset, future)
        self._open: asyncio.Future[None] | None = None  # appends still in the CommitLog's buffer
        self.wake = asyncio.Event()
        # Called with the new flushed offset before any waiter is resolved, so what an acknowledged
        # append wrote is already dispatched (visible to consumers) when its sender resumes.
        self.on_durable: Callable[[int], object] | None = None
        # ASYNC mode: called after a group was written, before its waiters are resolved (dispatch).
        self.on_written: Callable[[], object] | None = None
        log.on_written = self._written
        log.on_write_failed = self._write_failed

    def waiter(self, end_offset: int) -> asyncio.Future[None] | Done:
        """An awaitable completed once ``end_offset`` is durable (ASYNC: written), needing a running
        loop if it is not yet."""
        if end_offset <= self.flushed_offset:
            return DONE
        if self.ack_on_write and end_offset <= self.log.written_offset:
            return DONE
        for target, future in self._taken:
            if end_offset <= target:
                return future
        invariant(end_offset <= self.log.write_offset, "only appended records can become durable")
        if self._open is None:
            loop = asyncio.get_running_loop()
            self._open = loop.create_future()
            if self.ack_on_write:
                loop.call_soon(self._write_soon)
            else:
                self.wake.set()
        return self._open

    def _write_soon(self) -> None:
        """ASYNC mode: write the group this loop turn buffered (failures reach its waiters)."""
        with contextlib.suppress(StorageError):
            self.log.write_buffered()

    def _written(self) -> None:
        """The CommitLog wrote its buffered group: the open group becomes a written one."""
        future = self._open
        if future is None:
            return
        self._open = None
        if not self.ack_on_write:
            self._taken.append((self.log.written_offset, future))
            return
        try:
            if self.on_written is not None:
                self.on_written()
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            raise
        if not future.done():
            future.set_result(None)

    def _write_failed(self, exc: Exception) -> None:
        """The buffered group was rolled back: its waiters fail (DiskFull or StoreFenced)."""
        future, self._open = self._open, None
        if future is not None and not future.done():
            future.set_exception(exc)

    def take(self) -> tuple[int, list[Segment], DiskFull | None]:
        """Write the buffered group and close it: the offset the next fsync will cover, the segments
        to sync, and the DiskFull that failed the buffered group, if one did (its waiters know)."""
        disk_full: DiskFull | None = None
        try:
            self.log.write_buffered()
        except DiskFull as exc:
            disk_full = exc
        target = self.log.written_offset
        if self._open is not None:  # nothing buffered for it (cannot happen), yet keep it covered
            self._taken.append((target, self._open))
            self._open = None
        return target, self.log.take_dirty(), disk_full

    @staticmethod
    def sync_segments(segments: list[Segment]) -> None:
        for segment in segments:
            segment.handle.sync()

    def complete(self, target: int) -> None:
        invariant(target >= self.flushed_offset, "the flushed offset never goes back")
        self.flushed_offset = target
        self.flush_count += 1
        if self.on_durable is not None:
            self.on_durable(target)
        taken = self._taken
        while taken and taken[0][0] <= target:
            _, future = taken.popleft()
            if not future.done():
                future.set_result(None)

    def fail(self, exc: OSError) -> StoreFenced:
        """Fence the store and fail every waiter; returns the error to raise."""
        self.log.fence(f"fsync failed: {exc}")
        error = StoreFenced(f"the store is read-only until restarted: {self.log.fence_reason}")
        futures = [future for _, future in self._taken] + ([self._open] if self._open else [])
        self._taken.clear()
        self._open = None
        for future in futures:
            if not future.done():
                future.set_exception(error)
        return error

    def flush_now(self) -> None:
        """Synchronous flush (tests, close, recovery); raises the DiskFull that failed the buffered
        group after syncing what was written before it."""
        self.log.check_writable()
        target, segments, disk_full = self.take()
        try:
            self.sync_segments(segments)
        except OSError as exc:
            raise self.fail(exc) from exc
        self.complete(target)
        if disk_full is not None:
            raise disk_full

    async def flush_async(self) -> None:
        """One group commit with the fsync in a worker thread."""
        self.log.check_writable()
        target, segments, _ = self.take()  # a DiskFull already failed the waiters of its group
        if target <= self.flushed_offset and not segments:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.sync_segments, segments)
        except OSError as exc:
            raise self.fail(exc) from exc
        self.complete(target)

    def fail_all_if_fenced(self) -> None:
        if self.log.fence_reason is not None and (self._taken or self._open is not None):
            self.fail(OSError(self.log.fence_reason))
