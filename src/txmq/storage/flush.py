"""Group commit: one write and one fdatasync cover every append buffered before the flush started.

Appends in SYNC mode register a future resolved once ``flushed_offset`` reaches their end offset.
The first append of a group schedules one flush step (``call_soon``: appends of the same loop turn
join the group; after a group of several appenders it waits ``limits.flush_defer_turns`` more turns,
so the other producers' next appends join too). The step writes the CommitLog's buffered group (one
``write``), takes the dirty segments and fsyncs them, then resolves every covered waiter and
dispatches, in that order and in the same call (``complete``): the remoting door's answers, which wait
on the group's shared ``Completion``, are written before the ConsumeQueue and index writes, and no
request is read before those are done. While the disk is not very slow (a moving average of fsync time at most
``limits.flush_inline_sync_us_max`` for a lone append, or the much lower
``flush_inline_shared_sync_us_max`` for a group of several appends, whose producers' next requests a
blocked loop would not read meanwhile) the fsync runs on
the loop's thread: a worker thread would need the GIL back twice per fsync (to start, and to
report), which a busy loop hands over only at the 5 ms switch interval. On a slower disk the fsync
runs on the store's own fsync thread (``txmq-fsync``, started at its first job) so the loop
keeps accepting appends meanwhile (they form the next group, flushed when this one completes): the
group goes over in a ``queue.SimpleQueue`` and comes back with one ``call_soon_threadsafe``, ~110k
instructions less per group than ``run_in_executor``'s futures and locks. A failed fsync fences
the store: the waiters and every later write fail with StoreFenced; fsync is never retried, because
after a failed fsync the kernel may already have dropped the dirty pages. A write that fails with
ENOSPC fails only its own group (rolled back by the CommitLog); the store keeps serving.

In ASYNC mode (``ack_on_write``) the open group is written at the end of the event-loop turn that
opened it, dispatched, and acknowledged; fsync happens every flush interval.

Preallocation (SYNC mode): once a group completed, if the CommitLog's prepared space runs low
(``CommitLog.prepare_due``), the next chunk of zeros is written and fsynced on the fsync thread (the
same hand-off as a group's fsync, not ``run_in_executor``) before the next group is flushed (groups
meanwhile collect appends, as during an fsync in a thread), so no zero-fill is ever in a group's
fdatasync and no group's write extends the file. It pays while groups are small (a journaled size
change saved per fdatasync, for the zeros written once): when groups average more than
``PREPARE_GROUP_BYTES_MAX`` the zeros would cost more disk bandwidth than the journal commits they
save, and nothing is prepared (the file grows with the groups).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from txmq.common import limits
from txmq.common.completion import Completion
from txmq.common.errors import DiskFull, StorageError, StoreFenced
from txmq.common.invariant import InvariantViolation
from txmq.storage.commitlog import CommitLog
from txmq.storage.segment import Segment, SegmentFile


class Done:
    """An awaitable that is already complete (ASYNC-mode acks, already-durable records)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


DONE = Done()
_LOG = logging.getLogger(__name__)
PREPARE_GROUP_BYTES_MAX = 64 * 1024  # groups larger on average: no zero-filling ahead
# a group's waiters: one future per awaiting appender, plus at most one Completion shared by the
# appenders that only add done callbacks (``waiter(shared=True)``)
_Group = list[asyncio.Future[None] | Completion]
# A job for the fsync thread: the segments of a group to fsync (with the group's target offset), or a
# segment file to zero-fill ahead up to the length given; the future settles with the microseconds
# the fsync took or the bytes the zero-fill wrote.
_Job = tuple[list[Segment] | SegmentFile, int, asyncio.Future[int]]


def _settle(group: _Group, exc: BaseException | None) -> None:
    """Resolve (``exc`` None) or fail every waiter of a group still waiting (a resolved
    ``Completion`` runs its callbacks now, a future's run from the loop)."""
    for future in group:
        if not future.done():
            if exc is None:
                future.set_result(None)
            else:
                future.set_exception(exc)


def _resolve(future: asyncio.Future[int], result: int, error: BaseException | None) -> None:
    """On the loop: settle a future of the fsync thread's work (unless cancelled meanwhile)."""
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def sync_inline(group_appends: int, sync_ema_us: float, inline_sync_us_max: float, busy: float) -> bool:
    """Whether a group's fsync runs on the event loop's thread: the disk has been fast lately, and
    for a group of several appends (several producers) very fast, since the loop blocked in fsync
    cannot read and append the next requests meanwhile; and the loop's thread was mostly idle since the
    last group completed (``busy``: its CPU time over the wall time in between): a busy loop (gRPC's
    per-call work with many calls in flight) would only stall, while a thread's fsync overlaps it.
    ``inline_sync_us_max`` inf: always inline; < 0: never."""
    if inline_sync_us_max == math.inf:
        return True
    if group_appends > 1:
        inline_sync_us_max = min(inline_sync_us_max, limits.flush_inline_shared_sync_us_max)
    return sync_ema_us <= inline_sync_us_max and busy <= limits.flush_inline_busy_max


def flush_turns_to_wait(previous_group_appends: int) -> int:
    """Loop turns a new group waits before its flush step runs: none after a lone append (a lone
    producer would only wait), a few after a group of several appenders, whose next appends arrive
    over the next turns (request read, handler task step) and then share the fsync."""
    if previous_group_appends >= limits.flush_defer_group_appends_min:
        return limits.flush_defer_turns
    return 0


def next_sync_ema_us(sync_ema_us: float, sample_us: float) -> float:
    """The moving average of fsync time after one more fsync took ``sample_us``."""
    return sync_ema_us + (sample_us - sync_ema_us) * limits.flush_sync_ema_weight


class GroupCommit:
    """Appends share one future per group: the *open* group collects appends until the flusher
    takes it (fixing its target offset); a taken group resolves when its fsync returns."""

    def __init__(self, log: CommitLog, flushed_offset: int, *, ack_on_write: bool = False,
                 timer_ns: Callable[[], int] = time.perf_counter_ns) -> None:  # fmt: skip
        self.log = log
        self.flushed_offset = flushed_offset
        self.flush_count = 0  # group commits completed (for benchmarks and metrics)
        self.ack_on_write = ack_on_write
        # A group is one future per waiter, never one shared: a waiter's task that is cancelled
        # cancels the future it awaits, which must not fail the rest of its group.
        self._taken: deque[tuple[int, _Group]] = deque()  # (target offset, waiters)
        self._open: _Group | None = None  # appends still in the CommitLog's buffer
        # the open group's one future for waiters that never await it (``waiter(shared=True)``: done
        # callbacks only, so nothing can cancel it), kept with the group it belongs to
        # (SYNC mode: a ``Completion``, whose callbacks run as the group completes, before its dispatch)
        self._shared: tuple[_Group, asyncio.Future[None] | Completion] | None = None
        self.wake = asyncio.Event()  # set when a group opens and no loop flushes automatically
        # SYNC mode, once start_auto ran: the loop that flushes, whether a flush step is scheduled or
        # running (a later group waits for it), the fsync running in a thread, fsync time average.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flushing = False
        self.inflight: asyncio.Future[int] | None = None
        # the store's fsync thread (started at its first job: an fsync that leaves the loop, or a
        # zero-fill ahead): jobs arrive through a C-level queue and each reports back with one
        # call_soon_threadsafe, where run_in_executor's hop cost ~110k instructions more (groupcost.md)
        self._jobs: queue.SimpleQueue[_Job | None] | None = None
        self.sync_ema_us = 0.0
        self.group_bytes_ema = 0.0  # bytes per completed group, moving average
        self._group_appends = 0  # waiters that joined the open group
        self._last_group_appends = 0  # ... the previous group
        self._turns_waited = 0  # loop turns the scheduled flush step has waited
        self._completed_ns = 0  # when the last group completed: wall (timer_ns) ...
        self._completed_cpu_ns = 0  # ... and the loop thread's CPU time
        self.inline_sync_us_max: float = limits.flush_inline_sync_us_max  # < 0: always in a thread
        self._timer_ns = timer_ns
        # Called with the new flushed offset right after the groups it covers were resolved, in the
        # same call (``complete``): the shared waiters' answers go out first, and what an acknowledged
        # append wrote is dispatched (visible to consumers) before the loop reads another request.
        self.on_durable: Callable[[int], object] | None = None
        # ASYNC mode: called after a group was written, before its waiters are resolved (dispatch).
        self.on_written: Callable[[], object] | None = None
        log.on_written = self._written
        log.on_write_failed = self._write_failed

    def waiter(
        self, end_offset: int, shared: bool = False, running: asyncio.AbstractEventLoop | None = None
    ) -> asyncio.Future[None] | Completion | Done:
        """An awaitable completed once ``end_offset`` is durable (ASYNC: written), needing a running
        loop if it is not yet (``running``: the caller knows it). ``shared``: the caller only adds
        done callbacks (never awaits it, so never cancels it): every such waiter of the open group
        gets the group's one waiter; in SYNC mode a ``Completion``, whose callbacks (the remoting
        door's answers) run inside the callback that completes the group, before its dispatch
        (:meth:`complete`). ASYNC mode keeps a future: its groups complete inside a CommitLog write,
        which may run in the middle of an append (a batch moving to a new segment)."""
        if end_offset <= self.flushed_offset:
            return DONE
        if self.ack_on_write and end_offset <= self.log.written_offset:
            return DONE
        loop = self._loop or running or asyncio.get_running_loop()
        for target, group in self._taken:
            if end_offset <= target:
                future = loop.create_future()
                group.append(future)
                return future
        if end_offset > self.log.write_offset:  # invariant() inline: an interpreted call per waiter otherwise
            raise InvariantViolation("only appended records can become durable")
        if self._open is None:
            self._open = []
            if self.ack_on_write:
                loop.call_soon(self._write_soon)
            elif self._loop is None:
                self.wake.set()
            elif not self._flushing:
                self._flushing = True
                self._loop.call_soon(self._flush_step)
        self._group_appends += 1
        if shared:
            pair = self._shared
            if pair is not None and pair[0] is self._open:
                return pair[1]
            one: asyncio.Future[None] | Completion = (
                loop.create_future() if self.ack_on_write else Completion(loop)
            )
            self._open.append(one)
            self._shared = (self._open, one)
            return one
        future = loop.create_future()
        self._open.append(future)
        return future

    # ------------------------------------------------------------------- SYNC mode, automatic flush
    def start_auto(self, loop: asyncio.AbstractEventLoop) -> None:
        """SYNC mode: flush every group on ``loop`` as it opens (no task; see the module doc)."""
        self._loop = loop
        self._flushing = False
        if self._open is not None or self._taken:  # appended before the start: flush them now
            self._flushing = True
            loop.call_soon(self._flush_step)

    def stop_auto(self) -> asyncio.Future[int] | None:
        """Stop flushing automatically; returns the fsync still running in a thread, if any (the
        caller awaits it before closing files, then flushes what is left itself)."""
        self._loop = None
        return self.inflight

    def _flush_step(self) -> None:
        """Write the open group and fsync it (inline or in a thread), then complete it."""
        loop = self._loop
        if loop is None:  # stopped: the closer flushes what is left
            return
        if self._turns_waited < flush_turns_to_wait(self._last_group_appends):
            self._turns_waited += 1
            loop.call_soon(self._flush_step)
            return
        self._turns_waited = 0
        self._last_group_appends, self._group_appends = self._group_appends, 0
        try:
            self.log.check_writable()
            target, segments, _ = self.take()  # a DiskFull already failed the waiters of its group
            if not segments:
                self._flushing = False
                self.complete(max(target, self.flushed_offset))
                return
            wall = self._timer_ns() - self._completed_ns
            busy = (time.thread_time_ns() - self._completed_cpu_ns) / wall if wall > 0 else 1.0
            if not sync_inline(self._last_group_appends, self.sync_ema_us, self.inline_sync_us_max, busy):
                self.inflight = loop.create_future()
                self._fsync_jobs(loop).put((segments, target, self.inflight))
                return
            try:
                sync_us = self._timed_sync(segments)
            except OSError as exc:
                self._flushing = False
                self.fail(exc)
                return
            self._flushing = False
            self.sync_ema_us = next_sync_ema_us(self.sync_ema_us, sync_us)
            self.complete(target)
            self._prepare_soon()
        except Exception as exc:  # noqa: BLE001 - a loop callback: fence rather than strand waiters
            self._flush_failed(exc)

    def _fsync_jobs(self, loop: asyncio.AbstractEventLoop) -> queue.SimpleQueue[_Job | None]:
        """The fsync thread's queue, starting the thread on first use."""
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = queue.SimpleQueue()
            threading.Thread(
                target=self._fsync_worker, args=(loop, jobs), name="txmq-fsync", daemon=True
            ).start()
        return jobs

    def _fsync_worker(self, loop: asyncio.AbstractEventLoop, jobs: queue.SimpleQueue[_Job | None]) -> None:
        """The fsync thread: sync each group handed over and report to the loop (``_fsynced``), or
        zero-fill a segment ahead and settle its future (whose done callback is ``_prepared``)."""
        while (job := jobs.get()) is not None:
            what, target, future = job
            error: BaseException | None = None
            result = 0
            try:
                result = what.prepare(target) if isinstance(what, SegmentFile) else self._timed_sync(what)
            except BaseException as exc:  # noqa: BLE001 - reported to the loop, which fences
                error = exc
            try:
                if isinstance(what, SegmentFile):
                    loop.call_soon_threadsafe(_resolve, future, result, error)
                else:
                    loop.call_soon_threadsafe(self._fsynced, target, future, result, error)
            except RuntimeError:  # the loop is closed: nobody is left to tell
                return

    def _fsynced(
        self, target: int, future: asyncio.Future[int], sync_us: int, error: BaseException | None
    ) -> None:
        """On the loop: the fsync thread finished a group; settle its future (what ``close`` awaits)
        and complete the group with ``_synced`` one loop turn later, as the executor's chained future
        did: the turn in between reads what the other producers sent meanwhile (4 producers one in
        flight each: 1,294 msg/s completing at once against base's 1,901, median of 5)."""
        _resolve(future, sync_us, error)
        loop = self._loop
        if loop is None:  # stopped: the closer completes the groups
            return
        loop.call_soon(self._synced, target, future)

    def stop_thread(self) -> None:
        """Let the fsync thread end (after the fsync it may be running: ``stop_auto``'s future)."""
        jobs, self._jobs = self._jobs, None
        if jobs is not None:
            jobs.put(None)

    def _timed_sync(self, segments: list[Segment]) -> int:
        """fsync ``segments``; returns the microseconds it took."""
        start = self._timer_ns()
        self.sync_segments(segments)
        return (self._timer_ns() - start) // 1000

    def _synced(self, target: int, done: asyncio.Future[int]) -> None:
        """The fsync in a thread returned: complete its group, then flush the next one if any."""
        self.inflight = None
        self._flushing = False
        if self._loop is None:  # stopped while the fsync ran: the closer completes the groups
            return
        try:
            exc = done.exception()
            if isinstance(exc, OSError):
                self.fail(exc)
                return
            if exc is not None:
                raise exc
            self.sync_ema_us = next_sync_ema_us(self.sync_ema_us, done.result())
            self.complete(target)
            if self._prepare_soon():
                return
            if self._open is not None and not self._flushing:
                self._flushing = True
                self._loop.call_soon(self._flush_step)
        except Exception as exc:  # noqa: BLE001 - a loop callback: fence rather than strand waiters
            self._flush_failed(exc)

    def _prepare_soon(self) -> bool:
        """SYNC mode, after a group completed: zero-fill ahead on the fsync thread if the CommitLog's
        prepared space runs low; the next group waits for it (``_flushing``). True if started."""
        loop = self._loop
        if loop is None or self._flushing or self.group_bytes_ema > PREPARE_GROUP_BYTES_MAX:
            return False
        due = self.log.prepare_due()
        if due is None:
            return False
        handle, target = due
        self._flushing = True
        self.inflight = future = loop.create_future()
        future.add_done_callback(functools.partial(self._prepared, handle))
        self._fsync_jobs(loop).put((handle, target, future))
        return True

    def _prepared(self, handle: SegmentFile, done: asyncio.Future[int]) -> None:
        """Zero-filling ahead finished: go on with the group that collected meanwhile, if any."""
        self.inflight = None
        self._flushing = False
        exc = done.exception()
        if isinstance(exc, OSError):
            self.log.prepare_failed(handle, exc)
        elif exc is not None:
            self._flush_failed(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            return
        if self.log.fence_reason is not None:
            self.fail_all_if_fenced()
            return
        if self._loop is not None and self._open is not None:
            self._flushing = True
            self._loop.call_soon(self._flush_step)

    def _flush_failed(self, exc: Exception) -> None:
        """Dispatch failed or a bug: fence, so no waiter is left waiting forever."""
        self._flushing = False
        if not isinstance(exc, StorageError):
            _LOG.error("group commit failed", exc_info=exc)
        reason = exc.message if isinstance(exc, StorageError) else repr(exc)
        self.log.fence(f"background flush or dispatch failed: {reason}")
        self.fail_all_if_fenced()

    def _write_soon(self) -> None:
        """ASYNC mode: write the group this loop turn buffered (failures reach its waiters)."""
        with contextlib.suppress(StorageError):
            self.log.write_buffered()

    def _written(self) -> None:
        """The CommitLog wrote its buffered group: the open group becomes a written one."""
        group = self._open
        if group is None:
            return
        self._open = None
        if not self.ack_on_write:
            self._taken.append((self.log.written_offset, group))
            return
        try:
            if self.on_written is not None:
                self.on_written()
        except Exception as exc:
            _settle(group, exc)
            raise
        _settle(group, None)

    def _write_failed(self, exc: Exception) -> None:
        """The buffered group was rolled back: its waiters fail (DiskFull or StoreFenced)."""
        group, self._open = self._open, None
        if group is not None:
            _settle(group, exc)

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
        """``target`` is durable: resolve the groups it covers, then dispatch (``on_durable``).

        Answer first, then dispatch, in this one call: the shared waiters' callbacks (the remoting
        door writes its answers) run while the groups are resolved, before the ConsumeQueue and index
        writes; the futures' callbacks and the coroutines awaiting them run from the loop, after
        this call, so after the dispatch. Nothing yields in between, so any request read after an
        answer went out (a pull right after the send's ack) is handled after the dispatch: what an
        acknowledged append wrote is visible to it. If the dispatch fails (the store fences), the
        resolved waiters stay acknowledged: their records are durable in the CommitLog, and recovery
        dispatches them again at the next start."""
        if target < self.flushed_offset:  # invariant() inline: an interpreted call per group otherwise
            raise InvariantViolation("the flushed offset never goes back")
        self.group_bytes_ema += (
            target - self.flushed_offset - self.group_bytes_ema
        ) * limits.flush_sync_ema_weight
        self.flushed_offset = target
        self.flush_count += 1
        self._completed_ns = self._timer_ns()
        self._completed_cpu_ns = time.thread_time_ns()
        taken = self._taken
        while taken and taken[0][0] <= target:
            _settle(taken.popleft()[1], None)
        if self.on_durable is not None:
            self.on_durable(target)

    def fail(self, exc: OSError) -> StoreFenced:
        """Fence the store and fail every waiter; returns the error to raise."""
        self.log.fence(f"fsync failed: {exc}")
        error = StoreFenced(f"the store is read-only until restarted: {self.log.fence_reason}")
        groups = [group for _, group in self._taken] + ([self._open] if self._open is not None else [])
        self._taken.clear()
        self._open = None
        for group in groups:
            _settle(group, error)
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
