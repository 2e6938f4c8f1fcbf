"""Group commit: one fdatasync covers every append written before it started.

Appends in SYNC mode register a future resolved once ``flushed_offset`` reaches their end offset.
One flusher task takes the dirty segments, fsyncs them in a worker thread (so the event loop keeps
accepting appends, which form the next group), then resolves every covered waiter. A failed fsync
fences the store: the waiters and every later write fail with StoreFenced; fsync is never retried,
because after a failed fsync the kernel may already have dropped the dirty pages.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from txmq.common.errors import StoreFenced
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

    def __init__(self, log: CommitLog, flushed_offset: int) -> None:
        self.log = log
        self.flushed_offset = flushed_offset
        self.flush_count = 0  # group commits completed (for benchmarks and metrics)
        self._taken: deque[tuple[int, asyncio.Future[None]]] = deque()  # (target offset, future)
        self._open: asyncio.Future[None] | None = None
        self.wake = asyncio.Event()
        # Called with the new flushed offset before any waiter is resolved, so what an acknowledged
        # append wrote is already dispatched (visible to consumers) when its sender resumes.
        self.on_durable: Callable[[int], object] | None = None

    def waiter(self, end_offset: int) -> asyncio.Future[None] | Done:
        """An awaitable completed once ``end_offset`` is durable (needs a running loop if not yet)."""
        if end_offset <= self.flushed_offset:
            return DONE
        for target, future in self._taken:
            if end_offset <= target:
                return future
        invariant(end_offset <= self.log.write_offset, "only written records can become durable")
        if self._open is None:
            self._open = asyncio.get_running_loop().create_future()
            self.wake.set()
        return self._open

    def take(self) -> tuple[int, list[Segment]]:
        """Close the open group: the offset the next fsync will cover and the segments to sync."""
        target = self.log.write_offset
        if self._open is not None:
            self._taken.append((target, self._open))
            self._open = None
        return target, self.log.take_dirty()

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
        """Synchronous flush (tests, close, recovery)."""
        self.log.check_writable()
        target, segments = self.take()
        try:
            self.sync_segments(segments)
        except OSError as exc:
            raise self.fail(exc) from exc
        self.complete(target)

    async def flush_async(self) -> None:
        """One group commit with the fsync in a worker thread."""
        self.log.check_writable()
        target, segments = self.take()
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
