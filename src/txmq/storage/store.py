"""MessageStore: the facade the broker uses. Wiring and edge validation only; the work is in
commitlog (append/read), flush (group commit), dispatch (ConsumeQueues + index), recovery and
checkpoint.

Background work runs in tasks started by :meth:`MessageStore.start`; tests may instead step the
store with :meth:`flush`, :meth:`run_once` and :meth:`checkpoint` (no sleeps, no tasks).

Failure semantics:

* A failed ``write`` (other than ENOSPC) or ``fsync`` fences the store: that append and every later
  one raise StoreFenced, pending SYNC waiters fail, fsync is never retried; restart to recover.
* ENOSPC fails only that append with DiskFull: the partial write is truncated back and no queue
  offset is consumed, so nothing half-written remains and the store keeps serving (appends succeed
  again once space is freed). If the truncate itself fails, the store is fenced.
* A batch is written with one write into one segment: a write failure leaves none of it. After a
  crash, a torn batch may keep a prefix of its records; none of them was acknowledged.
* In SYNC mode an append is acknowledged, and dispatched to ConsumeQueues (so visible to readers),
  only after an fsync covered it. In ASYNC mode it is acknowledged after the write and a power cut
  may lose the last ``flush_interval_ms``, never leaving a gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import threading
from collections.abc import Awaitable, Generator, Iterator, Sequence
from typing import Any, Final

from txmq.common import limits, names
from txmq.common.clock import Clock, SystemClock
from txmq.common.errors import (
    CorruptRecord,
    DiskFull,
    InvalidArgument,
    InvalidOffset,
    InvalidProperty,
    MessageTooLarge,
    PayloadTooLarge,
    PropertiesTooLarge,
    StorageError,
    StoreFenced,
)
from txmq.common.fastinit import tuple_maker
from txmq.storage import codec
from txmq.storage.api import (
    AppendResult,
    ArrivalListener,
    FlushMode,
    IndexKeysFn,
    PutRequest,
    QueueRead,
    QueueUnit,
    RawQueueRead,
    ReadStatus,
    RecoveryReport,
    StoreConfig,
    StoredRecord,
)
from txmq.storage.checkpoint import Checkpoint, pin_layout, save_checkpoint
from txmq.storage.commitlog import BatchAppend, CommitLog
from txmq.storage.consume_queue import ConsumeQueue, ConsumeQueueSet
from txmq.storage.dispatch import Dispatcher
from txmq.storage.flush import DONE, GroupCommit
from txmq.storage.fs import FileSystem, OsFileSystem
from txmq.storage.index import KeyIndex, no_keys
from txmq.storage.recovery import recover
from txmq.storage.segment import SegmentList, records_from, scan_segment

_new_tuple = tuple.__new__

_LOG = logging.getLogger(__name__)
_I32: Final = 1 << 31  # Final: compiled code reads a constant, not a module global per check
_I64: Final = 1 << 63
_I61: Final = 1 << 61  # a short (tagged) int for mypyc: _fits_i64's fast comparisons
_GET_IDENT: Final = threading.get_ident  # bound once: compiled code calls it from a C static
_SHORT: Final = (1 << 62) - 1  # compiled code's small integers end here: their compares are of C integers


class _DurableLater:
    """Awaitable for an append made without a running loop: registers its waiter when awaited."""

    __slots__ = ("_commit", "_end")

    def __init__(self, commit: GroupCommit, end: int) -> None:
        self._commit = commit
        self._end = end

    def __await__(self) -> Generator[Any, None, None]:
        yield from self._commit.waiter(self._end).__await__()


class MessageStore:
    def __init__(self, config: StoreConfig, clock: Clock, fs: FileSystem, log: CommitLog,
                 queues: ConsumeQueueSet, index: KeyIndex, report: RecoveryReport) -> None:  # fmt: skip
        self.config = config
        self.clock = clock
        self.fs = fs
        self.recovery_report = report
        self._log = log
        self._queues = queues
        self._index = index
        self._sync = config.flush_mode is FlushMode.SYNC
        self._commit = GroupCommit(log, log.write_offset, ack_on_write=not self._sync)
        self._dispatcher = Dispatcher(log, queues, index, report.scanned_from)
        if self._sync:
            self._commit.on_durable = self._dispatcher.run_once
        else:
            self._commit.on_written = self.run_once
        self._tasks: list[asyncio.Task[None]] = []
        self._dispatch_wake = asyncio.Event()
        self._closed = False
        # the loop ``start`` ran on and its thread: an append on it needs no running-loop lookup
        # (``asyncio.get_running_loop`` makes a getpid system call each time on Python 3.11)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._inflight: asyncio.Future[None] | None = None
        self._checkpointing: asyncio.Future[None] | None = None  # a checkpoint's writes on a worker thread
        # what the last checkpoint recorded (offsets and queue ends): an unchanged one is not written
        self._checkpointed: tuple[int, int, tuple[tuple[str, int, int], ...] | None] | None = None
        # Deterministic simulation hook: with no background tasks (``start`` never called), every
        # append is fsynced and dispatched before it returns, one group commit per append. Off in
        # production; the acknowledgement rules (ack only after fsync in SYNC mode) are unchanged.
        self.inline_flush = False

    # ------------------------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, config: StoreConfig, *, clock: Clock | None = None, fs: FileSystem | None = None,
             index_keys: IndexKeysFn | None = None) -> MessageStore:  # fmt: skip
        """Open (and recover) the store in ``config.data_dir``; ``recovery_report`` says what was done."""
        _validate_config(config)
        fs = fs if fs is not None else OsFileSystem()
        clock = clock if clock is not None else SystemClock()
        fs.makedirs(config.data_dir)
        pin_layout(fs, config.data_dir, config.segment_bytes)
        segments = SegmentList(fs, posixpath.join(config.data_dir, "commitlog"), config.segment_bytes)
        log = CommitLog(segments, clock, config.store_host.encode())
        queues = ConsumeQueueSet(
            fs, posixpath.join(config.data_dir, "consumequeue"), config.consume_queue_units_per_file
        )
        index = KeyIndex(fs, posixpath.join(config.data_dir, "index"), index_keys or no_keys)
        try:
            report = recover(fs, config.data_dir, log, queues, index, clock)
        except BaseException:
            segments.close()
            queues.close()
            index.close()
            raise
        # SYNC mode only: ASYNC fsyncs once per interval, so a size change per append costs it nothing
        log.prealloc_bytes = config.prealloc_bytes if config.flush_mode is FlushMode.SYNC else 0
        try:
            if log.prealloc_bytes and segments.active is None:  # a new store: its first segment now
                segments.create(log.write_offset)
            log.prepare_ahead()  # the tail's prepared space, before any append needs it
        except (OSError, StorageError):
            segments.close()
            queues.close()
            index.close()
            raise
        store = cls(config, clock, fs, log, queues, index, report)
        store._dispatcher.run_once(log.write_offset)
        for queue in queues.queues.values():
            queue.retire_below(segments.min_offset())  # retention may have run before the restart
        store.checkpoint()
        return store

    async def start(self) -> None:
        """Start the flusher, dispatcher and checkpoint tasks on the running loop."""
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._loop, self._loop_thread = loop, threading.get_ident()
        if self._sync:
            self._commit.start_auto(loop)  # each group flushed as it opens (callbacks, no task)
        else:
            self._tasks.append(loop.create_task(self._flush_loop(), name="txmq-store-flush"))
            self._tasks.append(loop.create_task(self._dispatch_loop(), name="txmq-store-dispatch"))
        self._tasks.append(loop.create_task(self._checkpoint_loop(), name="txmq-store-checkpoint"))
        for task in self._tasks:
            task.add_done_callback(self._on_task_done)

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        """A background task that dies of a bug must not leave appenders waiting forever."""
        if task.cancelled() or task.exception() is None:
            return
        _LOG.error("store task %s failed", task.get_name(), exc_info=task.exception())
        self._log.fence(f"internal error in {task.get_name()}: {task.exception()!r}")
        self._commit.fail_all_if_fenced()

    async def close(self) -> None:
        """Stop the tasks, flush, checkpoint and close every file."""
        if self._closed:
            return
        self._closed = True
        self._loop = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            # a task that died of an error was logged and fenced the store (_on_task_done): close anyway
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        checkpointing, self._checkpointing = self._checkpointing, None
        if checkpointing is not None:  # never write the checkpoint file from two threads at once
            try:
                await checkpointing
            except Exception as exc:  # noqa: BLE001 - its files may not be durable: no checkpoint after it
                self._log.fence(f"a checkpoint failed: {exc!r}")
        synced = self._commit.stop_auto()
        if synced is not None:
            with contextlib.suppress(Exception):  # its failure fenced the store and told its waiters
                await synced  # never close files under an fsync still running in a thread
        self._commit.stop_thread()
        if self._inflight is not None:
            with contextlib.suppress(StorageError):
                await self._inflight  # never close files under an fsync still running in a thread
        if self._log.fence_reason is None:
            with contextlib.suppress(DiskFull):  # the unwritten group's waiters were told
                self._commit.flush_now()  # (no zero-filling ahead, as flush() does)
                self.run_once()
            self.checkpoint()
        self._commit.fail_all_if_fenced()
        self._log.segments.close()
        self._queues.close()
        self._index.close()

    async def _flush_loop(self) -> None:
        """ASYNC mode: fsync every flush interval (SYNC mode flushes each group, ``start_auto``)."""
        interval_s = self.config.flush_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self._inflight = asyncio.ensure_future(self._commit.flush_async())
                await asyncio.shield(self._inflight)
                self.run_once()
                if self._log.prepare_due() is not None:  # zero-fill ahead off the loop
                    self._inflight = asyncio.ensure_future(self._prepare_async())
                    await asyncio.shield(self._inflight)
            except StorageError as exc:
                self._log.fence(f"background flush or dispatch failed: {exc.message}")
                self._commit.fail_all_if_fenced()
                await asyncio.Event().wait()  # fenced: nothing more to flush until restart

    async def _dispatch_loop(self) -> None:
        while True:
            await self._dispatch_wake.wait()
            self._dispatch_wake.clear()
            try:
                self.run_once()
            except StoreFenced:
                return

    async def _checkpoint_loop(self) -> None:
        """Every interval: a checkpoint. On the real disk its fsyncs (queue and index files, the
        checkpoint file and its directory) run on a worker thread, not on the loop (a latency spike
        every second otherwise); what it records was taken on the loop before them, so it never claims
        more than is durable. A failure ends the task, which fences the store (``_on_task_done``)."""
        loop = asyncio.get_running_loop()
        off_loop = isinstance(self.fs, OsFileSystem)  # the simulated file systems are not thread-safe
        while True:
            await asyncio.sleep(self.config.checkpoint_interval_ms / 1000)
            if self._log.fence_reason is not None:
                return
            if not off_loop:
                self.checkpoint()
                continue
            plan = self._plan_checkpoint()
            if plan is None:
                continue
            paths, checkpoint, state = plan
            written = loop.run_in_executor(None, self._write_checkpoint, paths, checkpoint)
            self._checkpointing = written
            await asyncio.shield(written)  # a close cancelling this task awaits it itself
            self._checkpointing = None
            self._checkpointed = state

    # ---------------------------------------------------------------------------------- stepping
    def run_once(self) -> int:
        """Dispatch what is visible (flushed in SYNC mode, written in ASYNC mode); returns records."""
        return self._dispatcher.run_once(self._visible_limit())

    async def _prepare_async(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._log.prepare_ahead)

    def flush(self) -> None:
        """Synchronous group commit and dispatch, then zero-fill ahead if due (tests, stepping)."""
        self._commit.flush_now()
        self._log.prepare_ahead()
        self.run_once()

    def checkpoint(self) -> None:
        """Make ConsumeQueues and the index durable, then record how far they go (unless the last
        checkpoint recorded the same: the checkpoint task runs every second, idle or not)."""
        plan = self._plan_checkpoint()
        if plan is None:
            return
        paths, checkpoint, state = plan
        self._write_checkpoint(paths, checkpoint)
        self._checkpointed = state

    def _plan_checkpoint(
        self,
    ) -> tuple[list[str], Checkpoint | None, tuple[int, int, tuple[tuple[str, int, int], ...] | None]] | None:
        """On the loop: what a checkpoint records, taken before anything is synced: the queue and
        index files written since the last one (every unit and entry of a record before the
        dispatched offset was written to them already: dispatch writes before it advances), and the
        checkpoint if it says something new. None: nothing to do."""
        if self._log.fence_reason is not None:
            return None
        flushed = self._commit.flushed_offset
        dispatched = min(self._dispatcher.dispatched_offset, flushed)
        paths = self._queues.take_dirty() + self._index.take_dirty()
        ends = None
        if dispatched == self._dispatcher.dispatched_offset:  # the queues hold exactly what is before it
            ends = tuple((t, q, queue.max_offset) for (t, q), queue in self._queues.queues.items())
        state = (dispatched, flushed, ends)
        checkpoint = None
        if state != self._checkpointed:  # an idle store writes nothing (the file on disk says the same)
            checkpoint = Checkpoint(dispatched, flushed, self.clock.now_ms(), ends)
        if not paths and checkpoint is None:
            return None
        return paths, checkpoint, state

    def _write_checkpoint(self, paths: list[str], checkpoint: Checkpoint | None) -> None:
        """Sync the files a plan named, then save its checkpoint: on the loop (``checkpoint``) or, for
        the real disk, on a worker thread (``_checkpoint_loop``) while the loop keeps serving."""
        for path in paths:
            self.fs.sync_path(path)
        if checkpoint is not None:
            save_checkpoint(self.fs, self.config.data_dir, checkpoint)

    def _visible_limit(self) -> int:
        return self._commit.flushed_offset if self._sync else self._log.written_offset

    # ----------------------------------------------------------------------------------- writing
    def put_nowait(self, req: PutRequest, shared: bool = False) -> tuple[AppendResult, Awaitable[None]]:
        """Append now; the awaitable completes when the record is durable per the flush mode.
        ``shared``: the caller only adds done callbacks to it, never awaits it (see
        :meth:`GroupCommit.waiter`): it may be the group's one future."""
        topic, fields = _validate(req)
        return self._put_one_checked(topic, fields, shared)

    def put_record_nowait(
        self, topic: str, fields: codec.RecordFields, shared: bool = False
    ) -> tuple[AppendResult, Awaitable[None]]:
        """:meth:`put_nowait` for a record whose fields the writer built itself (a half message):
        the same checks (:func:`_check_fields`), without a :class:`PutRequest`."""
        _check_fields(topic, fields)
        return self._put_one_checked(topic, fields, shared)

    def _put_one_checked(
        self, topic: str, fields: codec.RecordFields, shared: bool
    ) -> tuple[AppendResult, Awaitable[None]]:
        if self._closed:
            raise StorageError("the store is closed")
        result = self._log.append_one(topic, fields)
        return result, self._durable(result.physical_offset + result.size, shared)

    async def put(self, req: PutRequest) -> AppendResult:
        result, durable = self.put_nowait(req)
        await durable
        return result

    async def put_batch(self, reqs: Sequence[PutRequest]) -> list[AppendResult]:
        """Append every request or none (one write), acknowledged together."""
        results, durable = self.put_batch_nowait(reqs)
        await durable
        return results

    def put_batch_nowait(
        self, reqs: Sequence[PutRequest], shared: bool = False
    ) -> tuple[list[AppendResult], Awaitable[None]]:
        """Validate all, then append all in one write (into one segment); the awaitable completes
        when the whole batch is durable per the flush mode (``shared``: as for :meth:`put_nowait`)."""
        if not reqs:
            raise InvalidArgument("a batch needs at least one message")
        return self._put_checked([_validate(r) for r in reqs], shared)

    def put_fields_nowait(
        self, batch: Sequence[tuple[str, codec.RecordFields]], shared: bool = False
    ) -> tuple[list[AppendResult], Awaitable[None]]:
        """:meth:`put_batch_nowait` for records whose fields the writer built itself, as ``(topic,
        fields)`` (the transaction service's decision: its two records need no :class:`PutRequest`
        each): the same checks (:func:`_check_fields`, as :meth:`put_records_columns`), one write."""
        if not batch:
            raise InvalidArgument("a batch needs at least one message")
        for topic, fields in batch:
            _check_fields(topic, fields)
        return self._put_checked(batch, shared)

    @staticmethod
    def fields_of(req: PutRequest) -> tuple[str, codec.RecordFields]:
        """A request's ``(topic, fields)`` for :meth:`put_fields_nowait`, checked as an append checks it."""
        return _validate(req)

    @staticmethod
    def check_fields(topic: str, fields: codec.RecordFields) -> None:
        """Raise what an append of ``fields`` would raise for them (nothing if they may be stored)."""
        _check_fields(topic, fields)

    def _put_checked(
        self, batch: Sequence[tuple[str, codec.RecordFields]], shared: bool
    ) -> tuple[list[AppendResult], Awaitable[None]]:
        if len(batch) > limits.batch_count_max:
            raise PayloadTooLarge("batch message count", len(batch), limits.batch_count_max)
        body_bytes = 0
        for _, fields in batch:  # a loop, not a generator: compiled, no generator object per batch
            body_bytes += len(fields.body)
        if body_bytes > limits.batch_bytes_max:
            raise PayloadTooLarge("batch", body_bytes, limits.batch_bytes_max)
        if self._closed:
            raise StorageError("the store is closed")
        results = self._log.append(batch)
        last = results[-1]
        return results, self._durable(last.physical_offset + last.size, shared)

    def put_records_nowait(
        self, topic: str, records: Sequence[codec.RecordFields], shared: bool = False
    ) -> tuple[list[AppendResult], Awaitable[None]]:
        """:meth:`put_records_columns` answered with one :class:`AppendResult` per record.
        ``shared``: the caller only adds done callbacks to the awaitable, never awaits it (see
        :meth:`GroupCommit.waiter`); a one-record append then shares its group's future."""
        appended, durable = self.put_records_columns(topic, records, shared)
        return appended.results(), durable

    def put_records_columns(
        self, topic: str, records: Sequence[codec.RecordFields], shared: bool = False
    ) -> tuple[BatchAppend, Awaitable[None]]:
        """:meth:`put_nowait` (one record) or :meth:`put_batch_nowait` (several, atomic) for a writer
        that built the record fields itself (the broker's send lane): the same checks, without a
        PutRequest per message. Every record's ``topic`` must be ``topic`` encoded."""
        if not records:
            raise InvalidArgument("a batch needs at least one message")
        if len(records) == 1:
            _check_fields(topic, records[0])
            if self._closed:
                raise StorageError("the store is closed")
            result = self._log.append_one(topic, records[0])
            # one C call (a NamedTuple's own __new__ is interpreted Python, a call per message)
            appended: BatchAppend = _MAKE_BATCH_APPEND(
                (result.physical_offset,), (result.size,), (result.queue_offset,), result.store_timestamp_ms
            )
            return appended, self._durable(result.physical_offset + result.size, shared)
        return self.put_columns(topic, codec.columns(records))

    def put_columns(
        self, topic: str, columns: codec.Columns, shared: bool = False
    ) -> tuple[BatchAppend, Awaitable[None]]:
        """:meth:`put_records_columns` for a batch of several records given as columns (the send
        lane's batch builds them so: no :class:`RecordFields` per message, no transpose back).
        ``shared``: the caller only adds done callbacks to the awaitable, never awaits it (see
        :meth:`put_nowait`): in SYNC mode its callbacks run before the group's dispatch."""
        if not columns or not columns[0]:
            raise InvalidArgument("a batch needs at least one message")
        _check_records(topic, columns)  # a bad record's error comes first, as record by record
        count = len(columns[0])
        if count > limits.batch_count_max:
            raise PayloadTooLarge("batch message count", count, limits.batch_count_max)
        body_bytes = _total_len(columns[2])
        if body_bytes > limits.batch_bytes_max:
            raise PayloadTooLarge("batch", body_bytes, limits.batch_bytes_max)
        if self._closed:
            raise StorageError("the store is closed")
        appended = self._log.append_columns(topic, columns)
        return appended, self._durable(appended.physical_offsets[-1] + appended.sizes[-1], shared)

    def _durable(self, end_offset: int, shared: bool = False) -> Awaitable[None]:
        if self.inline_flush:
            self.flush()  # raises StoreFenced (and fences) if the fsync fails: the append is not acked
            return DONE
        loop = self._loop
        if loop is not None and loop.is_running() and _GET_IDENT() == self._loop_thread:
            return self._commit.waiter(end_offset, shared, loop)  # the running loop is the store's
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if not self._sync:  # no loop to write at the end of its turn: write (and dispatch) now
                self._log.write_buffered()
                self.run_once()
                return DONE
            return _DurableLater(self._commit, end_offset)
        # SYNC: after the group's fsync; ASYNC: after the group's write at the end of this loop turn
        # (dispatched first, so an acknowledged record is visible), fsynced every flush interval.
        return self._commit.waiter(end_offset, shared)

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self._dispatcher.listeners.append(listener)

    # ----------------------------------------------------------------------------------- reading
    def read(self, physical_offset: int) -> StoredRecord:
        return self._log.read(physical_offset, self._visible_limit())

    def records_from(self, physical_offset: int) -> Iterator[StoredRecord]:
        """Every readable record from ``physical_offset`` (a record's start or the log's end at some
        moment; clamped to the log's start) in log order: a start-up scan of a short stretch."""
        return records_from(self._log.segments, physical_offset, self._visible_limit())

    def read_queue(self, topic: str, queue_id: int, queue_offset: int, max_count: int,
                   max_bytes: int = limits.pull_bytes_max) -> QueueRead:  # fmt: skip
        return self._read_queue(topic, queue_id, queue_offset, max_count, max_bytes, True)

    def _read_queue(self, topic: str, queue_id: int, queue_offset: int, max_count: int, max_bytes: int,
                    repair: bool) -> QueueRead:  # fmt: skip
        queue, miss = self._locate(topic, queue_id, queue_offset, max_count)
        if queue is None:
            return QueueRead(*miss)
        low, high = queue.min_offset, queue.max_offset
        locations: list[tuple[int, int, int, int]] = []
        total = 0
        at = queue_offset
        units = queue.raw_units(queue_offset, min(max_count, limits.pull_batch_max))
        for physical_offset, size, tags_code in units:
            if locations and total + size > max_bytes:
                break
            locations.append((physical_offset, size, tags_code, at))
            total += size
            at += 1
        raws = self._read_units(topic, queue_id, queue, queue_offset, len(locations), locations, repair)
        if raws is None:  # a damaged unit was rebuilt from the log: read again
            return self._read_queue(topic, queue_id, queue_offset, max_count, max_bytes, False)
        # the raw read (one header unpack per record) and StoredRecords from its fields: the records
        # a full decode per record gives, at about half its cost (receives read every message here)
        stored = codec.stored_record
        records = [stored(raw) for raw in raws]
        return QueueRead(ReadStatus.FOUND, records, queue_offset + len(records), low, high)

    def read_queue_raw(self, topic: str, queue_id: int, queue_offset: int, max_count: int,
                       max_bytes: int = limits.pull_bytes_max,
                       tags_codes: frozenset[int] | None = None) -> RawQueueRead:  # fmt: skip
        """:meth:`read_queue` with the records as raw fields (``codec.RawRecord``), for the pull path.

        Same units, same byte budget, same next offset. With ``tags_codes``, units whose tags code is
        not in it are left out without reading their records whole (hash collisions still come back:
        the caller checks the tag itself), but each is held to its record's header
        (``CommitLog.units_named``), so a unit whose tags code was damaged on disk is rebuilt instead of
        hiding its message from the filter."""
        return self._read_queue_raw(topic, queue_id, queue_offset, max_count, max_bytes, tags_codes, True)

    def read_queue_into(self, topic: str, queue_id: int, queue_offset: int, max_count: int, max_bytes: int,
                        sink: codec.RecordSink) -> RawQueueRead:  # fmt: skip
        """:meth:`read_queue_raw` (no tag filter) with the records handed to ``sink``
        (``CommitLog.read_many_into``: the same checks, no RawRecord tuples); the result's ``records``
        is empty, ``sink.count`` says how many were read. The sink is cleared first (and again if a
        damaged unit is rebuilt and the queue read again)."""
        sink.clear()
        return self._read_queue_raw(topic, queue_id, queue_offset, max_count, max_bytes, None, True, sink)

    def _read_queue_raw(self, topic: str, queue_id: int, queue_offset: int, max_count: int, max_bytes: int,
                        tags_codes: frozenset[int] | None, repair: bool,
                        sink: codec.RecordSink | None = None) -> RawQueueRead:  # fmt: skip
        queue, miss = self._locate(topic, queue_id, queue_offset, max_count)
        if queue is None:
            return RawQueueRead(*miss)
        low, high = queue.min_offset, queue.max_offset
        locations: list[tuple[int, int, int, int]] = []
        left_out: list[tuple[int, int, int, int]] = []  # units the filter leaves out (checked once)
        total = counted = 0
        for physical_offset, size, tags_code in queue.raw_units(
            queue_offset, min(max_count, limits.pull_batch_max)
        ):
            if counted and total + size > max_bytes:
                break
            if tags_codes is None or tags_code in tags_codes:
                locations.append((physical_offset, size, tags_code, queue_offset + counted))
            elif repair:
                left_out.append((physical_offset, size, tags_code, queue_offset + counted))
            counted += 1
            total += size
        # a unit the filter leaves out is held to its record's header; one that does not name it is
        # rebuilt (else: the log's own damage in a record the filter leaves out, passed over as before)
        rebuilt: bool = (
            bool(left_out)
            and not self._log.units_named(left_out, self._visible_limit(), _topic_bytes(topic), queue_id)
            and self._repair_units(topic, queue_id, queue, queue_offset, counted)
        )
        records = (
            None
            if rebuilt
            else self._read_units(topic, queue_id, queue, queue_offset, counted, locations, repair, sink)
        )
        if records is None:  # a damaged unit was rebuilt from the log: read again
            if sink is not None:
                sink.clear()
            return self._read_queue_raw(
                topic, queue_id, queue_offset, max_count, max_bytes, tags_codes, False, sink
            )
        return RawQueueRead(ReadStatus.FOUND, records, queue_offset + counted, low, high)

    def _read_units(
        self,
        topic: str,
        queue_id: int,
        queue: ConsumeQueue,
        first: int,
        counted: int,
        locations: list[tuple[int, int, int, int]],
        repair: bool,
        sink: codec.RecordSink | None = None,
    ) -> list[codec.RawRecord] | None:
        """The records at ``locations`` (``(log offset, size, tags code, queue offset)`` of units in the
        ``counted`` units the read covers from queue offset ``first``), each checked to be the one its
        unit names: its log offset, size and tags code, this topic and queue, this queue offset (in
        ``codec.split_checked``, on fields it unpacks anyway). A ConsumeQueue unit damaged on disk (a
        flipped bit) points elsewhere, at another record or at none; then the units are checked against
        the log and a damaged one is rebuilt from it (:meth:`_repair_units`) and None returned: the
        caller reads again. An error with every unit intact is the log's own damage (logged once per
        record), raised. With ``sink``, the records go to it (``CommitLog.read_many_into``) and the
        list returned is empty."""
        if not locations:
            return []
        try:
            if sink is not None:
                self._log.read_many_into(
                    locations, self._visible_limit(), _topic_bytes(topic), queue_id, sink, True
                )
                return []
            return self._log.read_many_raw(
                locations, self._visible_limit(), True, _topic_bytes(topic), queue_id
            )
        except (InvalidOffset, CorruptRecord) as exc:
            if repair and self._repair_units(topic, queue_id, queue, first, counted):
                return None
            if isinstance(exc, CorruptRecord):
                self._log.note_damage(exc)
            raise

    def _unit_holds(self, topic: str, queue_id: int, queue_offset: int, unit: tuple[int, int, int]) -> bool:
        """Whether the record ``unit`` names is the one for ``queue_offset`` of this queue."""
        physical_offset, size, tags_code = unit
        if 0 <= physical_offset < self._log.segments.min_offset():
            return size > 0  # its segment was removed by retention: nothing to check it against
        try:
            record = self._log.read(physical_offset, self._visible_limit(), True)
        except (InvalidOffset, CorruptRecord):
            return False
        return (
            record.topic == topic and record.queue_id == queue_id and record.queue_offset == queue_offset
            and record.size == size and record.tags_code == tags_code
        )  # fmt: skip

    def _repair_units(self, topic: str, queue_id: int, queue: ConsumeQueue, first: int, count: int) -> bool:
        """Check the units ``[first, first + count)`` against the log; rebuild every damaged one (and any
        damaged neighbours) from the records the log holds between the intact units around them, and
        log it. False when none was rebuilt: every unit is intact, or the log lacks the records (a
        damaged record stops its scan), which the read's own error then names."""

        def holds(queue_offset: int) -> bool:
            units = queue.raw_units(queue_offset, 1)
            return bool(units) and self._unit_holds(topic, queue_id, queue_offset, units[0])

        bad = [q for q in range(first, first + count) if not holds(q)]
        rebuilt = False
        limit = self._visible_limit()
        low_end = queue.min_offset
        for start in bad:
            if start < low_end:
                continue  # rebuilt with an earlier run
            end = start + 1
            while start > queue.min_offset and not holds(start - 1):
                start -= 1
            while end < queue.max_offset and not holds(end):
                end += 1
            low_end = end
            if start > queue.min_offset:
                before = queue.raw_units(start - 1, 1)[0]
                scan_from = before[0] + before[1]
            else:
                scan_from = self._log.segments.min_offset()
            scan_to = queue.raw_units(end, 1)[0][0] if end < queue.max_offset else limit
            found: dict[int, StoredRecord] = {}
            for record in records_from(self._log.segments, scan_from, limit):
                if record.physical_offset >= scan_to:
                    break
                mine = record.topic == topic and record.queue_id == queue_id
                if mine and start <= record.queue_offset < end:
                    found[record.queue_offset] = record
            if any(q not in found for q in range(start, end)):
                continue  # the log lacks a record there (its own damage): the read's error says so
            for q in range(start, end):
                record = found[q]
                queue.rewrite_unit(q, record.physical_offset, record.size, record.tags_code)
            _LOG.error(
                "ConsumeQueue %s/%d: units at queue offsets %d-%d did not name their records (damaged on "
                "disk); rebuilt from the CommitLog",
                topic, queue_id, start, end - 1,
            )  # fmt: skip
            rebuilt = True
        return rebuilt

    def _locate(
        self, topic: str, queue_id: int, queue_offset: int, max_count: int
    ) -> tuple[ConsumeQueue | None, tuple[ReadStatus, list[Any], int, int, int]]:
        """The queue to read from ``queue_offset`` on, or None and the (status, no records, next offset,
        min, max) a read answers when there is nothing to read there. A negative offset is below every
        queue's minimum (OFFSET_TOO_SMALL, next offset the minimum), as RocketMQ's getMessage answers."""
        _check_queue_args(queue_id, max(queue_offset, 0), max_count)
        queue = self._queues.get(topic, queue_id)
        if queue is None:
            return None, (ReadStatus.NO_QUEUE, [], 0, 0, 0)
        low, high = queue.min_offset, queue.max_offset
        status = _position_status(queue_offset, low, high)
        if status is not None:
            next_offset = low if status is ReadStatus.OFFSET_TOO_SMALL else high
            return None, (status, [], next_offset, low, high)
        return queue, (ReadStatus.FOUND, [], queue_offset, low, high)

    def queue_units(self, topic: str, queue_id: int, queue_offset: int, max_count: int) -> list[QueueUnit]:
        _check_queue_args(queue_id, queue_offset, max_count)
        queue = self._queues.get(topic, queue_id)
        return [] if queue is None else queue.units(queue_offset, min(max_count, limits.pull_batch_max))

    def queue_raw_units(
        self, topic: str, queue_id: int, queue_offset: int, max_count: int
    ) -> tuple[int, list[tuple[int, int, int]]]:
        """:meth:`queue_units` without a ``QueueUnit`` object per unit: the queue offset of the first
        unit (``queue_offset``, or the queue's minimum if that is past it) and ``(physical_offset, size,
        tags_code)`` of each, for scans that look at many units and keep few (the transaction cursor).
        Unchecked: hold the units a scan acts on to their records with :meth:`units_hold`."""
        _check_queue_args(queue_id, queue_offset, max_count)
        queue = self._queues.get(topic, queue_id)
        if queue is None:
            return queue_offset, []
        first = max(queue_offset, queue.min_offset)
        return first, queue.raw_units(first, min(max_count, limits.pull_batch_max))

    def units_hold(
        self, topic: str, queue_id: int, first: int, units: Sequence[tuple[int, int, int]]
    ) -> bool:
        """Whether ``units`` (of :meth:`queue_raw_units`, the first at queue offset ``first``) name their
        records (``CommitLog.units_named``: log offset, size, tags code, topic, queue id, queue offset:
        the header only). False when one did not and the damaged units were rebuilt from the log (logged
        once): read them again. True also when the log itself is damaged there (nothing to rebuild): the
        scan's read of that record meets the damage as before."""
        locations = [(p, size, tags, first + i) for i, (p, size, tags) in enumerate(units)]
        if self._log.units_named(locations, self._visible_limit(), _topic_bytes(topic), queue_id):
            return True
        queue = self._queues.get(topic, queue_id)
        return queue is None or not self._repair_units(topic, queue_id, queue, first, len(locations))

    def checked_units(self, topic: str, queue_id: int, queue_offset: int, max_count: int) -> list[QueueUnit]:
        """:meth:`queue_units`, each unit held to the header of the record it names (:meth:`units_hold`),
        for scans that act on a unit's fields before or without reading its record (delay levels and
        timer buckets: the tags code is a time there). A unit damaged on disk is rebuilt from the log
        and the units read again."""
        first, units = self.queue_raw_units(topic, queue_id, queue_offset, max_count)
        if units and not self.units_hold(topic, queue_id, first, units):
            first, units = self.queue_raw_units(topic, queue_id, queue_offset, max_count)
        return [QueueUnit(first + i, p, size, tags) for i, (p, size, tags) in enumerate(units)]

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get(topic, queue_id)
        return 0 if queue is None else queue.min_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get(topic, queue_id)
        return 0 if queue is None else queue.max_offset

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self._queues.get(topic, queue_id)
        return 0 if queue is None else queue.offset_by_time(timestamp_ms, self._log.store_ms_at)

    def query_by_key(
        self, key: str, max_count: int, begin_ms: int = 0, end_ms: int = _I64 - 1
    ) -> list[StoredRecord]:
        """Records whose keys (per the IndexKeysFn) include ``key``, newest first, at most max_count."""
        if max_count <= 0:
            raise InvalidArgument(f"max_count must be positive, got {max_count}")
        max_count = min(max_count, limits.pull_batch_max)
        limit = self._visible_limit()
        found: list[StoredRecord] = []
        for offset in self._index.lookup(key, max_count, begin_ms, end_ms, self._log.segments.min_offset()):
            if offset >= limit:
                continue
            record = self._log.read(offset, limit)
            if key in self._index.keys_fn(record.topic, record.properties):
                found.append(record)
        return found

    def queues(self) -> dict[str, list[int]]:
        result: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self._queues.queues):
            result.setdefault(topic, []).append(queue_id)
        return result

    # ---------------------------------------------------------------------------------- retention
    def delete_expired(self, now_ms: int) -> int:
        """Delete segments whose newest record is older than retention_ms; never the active one,
        never one not yet flushed and dispatched. Returns how many were removed."""
        segments = self._log.segments
        safe_end = min(self._dispatcher.dispatched_offset, self._commit.flushed_offset)
        removed = 0
        while len(segments.segments) > 1:
            first = segments.segments[0]
            if first.base + segments.segment_bytes > safe_end:
                break
            if now_ms - self._newest_store_ms(first.base) < self.config.retention_ms:
                break
            segments.remove_first()
            removed += 1
        if removed:
            log_min = segments.min_offset()
            for queue in self._queues.queues.values():
                queue.retire_below(log_min)
            self._index.retire_below(log_min)
        return removed

    def _newest_store_ms(self, base: int) -> int:
        segment = self._log.segments.segments[0]
        if segment.last_store_ms < 0:
            for item in scan_segment(segment, base, self._log.segment_bytes):
                if isinstance(item, StoredRecord):
                    segment.last_store_ms = max(segment.last_store_ms, item.store_timestamp_ms)
        return segment.last_store_ms

    # -------------------------------------------------------------------------------- properties
    @property
    def inline_sync_us_max(self) -> float:
        """SYNC mode fsyncs on the loop's thread while the average fsync takes at most this many
        microseconds, else in a worker thread (negative: always in a thread)."""
        return self._commit.inline_sync_us_max

    @inline_sync_us_max.setter
    def inline_sync_us_max(self, value: float) -> None:
        self._commit.inline_sync_us_max = value

    @property
    def flushed_offset(self) -> int:
        return self._commit.flushed_offset

    @property
    def dispatched_offset(self) -> int:
        return self._dispatcher.dispatched_offset

    @property
    def max_physical_offset(self) -> int:
        return self._log.write_offset

    @property
    def min_physical_offset(self) -> int:
        return self._log.segments.min_offset()

    @property
    def flush_count(self) -> int:
        """Group commits (fsync rounds) completed since open."""
        return self._commit.flush_count

    @property
    def fenced(self) -> bool:
        return self._log.fence_reason is not None

    @property
    def fence_reason(self) -> str | None:
        return self._log.fence_reason


def _validate_config(config: StoreConfig) -> None:
    if config.segment_bytes < limits.segment_bytes_min:
        raise InvalidArgument(f"segment_bytes {config.segment_bytes} is below {limits.segment_bytes_min}")
    if config.consume_queue_units_per_file <= 0 or config.flush_interval_ms <= 0:
        raise InvalidArgument("consume_queue_units_per_file and flush_interval_ms must be positive")
    if config.prealloc_bytes < 0:
        raise InvalidArgument(f"prealloc_bytes must not be negative, got {config.prealloc_bytes}")
    if len(config.store_host.encode()) > 255:
        raise InvalidArgument("store_host is longer than 255 bytes")


_VALID_TOPICS: Final[set[str]] = set()  # Final: read from a C static, not the module's dict
_VALID_TOPICS_MAX: Final = 100_000


def _validate(req: PutRequest) -> tuple[str, codec.RecordFields]:
    """Reject bad input with a specific error before anything is written."""
    _check_topic(req.topic)
    # one C call (_MAKE_RECORD_FIELDS): a NamedTuple's own __new__ is interpreted Python
    fields: codec.RecordFields = _MAKE_RECORD_FIELDS(
        req.topic.encode(), req.queue_id, req.body, req.properties, req.tags_code, req.flag,
        req.sys_flag, req.born_timestamp_ms, req.born_host.encode(), req.reconsume_times,
        req.prepared_transaction_offset, req.index_keys,
    )  # fmt: skip
    _check_fields(req.topic, fields)
    return req.topic, fields


def _check_topic(topic: str) -> None:
    if topic not in _VALID_TOPICS:
        names.validate_topic(topic, allow_system=True)
        if len(_VALID_TOPICS) < _VALID_TOPICS_MAX:
            _VALID_TOPICS.add(topic)


def _fits_i64(value: int) -> bool:
    """``-2**63 <= value < 2**63``; compiled, a value within +-2**61 (every real one) is decided by
    comparisons with short int constants, without the big-int comparison with 2**63."""
    return -_I61 <= value < _I61 or -_I64 <= value < _I64


def _check_fields(topic: str, f: codec.RecordFields) -> None:
    """The checks on a record's fields (built by :func:`_validate` or by a writer itself)."""
    _check_topic(topic)
    if f.topic != topic.encode():
        raise InvalidArgument(f"record fields name topic {f.topic[:300]!r}, not {topic[:300]!r}")
    if not 0 <= f.queue_id <= limits.queue_id_max:
        raise InvalidArgument(f"queue id {f.queue_id} is outside [0, {limits.queue_id_max}]")
    if len(f.body) > limits.body_bytes_max:
        raise MessageTooLarge("message body", len(f.body), limits.body_bytes_max)
    if len(f.properties) > limits.properties_bytes_max:
        raise PropertiesTooLarge("properties", len(f.properties), limits.properties_bytes_max)
    if not f.properties.isascii():  # ASCII is UTF-8: no throw-away str for the usual properties
        try:
            f.properties.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidProperty(f"properties are not valid UTF-8: {exc}") from None
    if len(f.born_host) > 255:
        raise InvalidArgument(f"born_host is {len(f.born_host)} bytes, over 255")
    # the 64-bit fields first against bounds a compiled int compares inline (a 2**63 bound is a long:
    # a rich compare per test, six per record); only a value outside them takes the exact test below
    if (
        -_I32 <= f.flag < _I32
        and -_I32 <= f.sys_flag < _I32
        and -_I32 <= f.reconsume_times < _I32
        and -_SHORT <= f.tags_code <= _SHORT
        and -_SHORT <= f.born_timestamp_ms <= _SHORT
        and -_SHORT <= f.prepared_transaction_offset <= _SHORT
    ):
        return
    if not (
        -_I32 <= f.flag < _I32
        and -_I32 <= f.sys_flag < _I32
        and -_I32 <= f.reconsume_times < _I32
        and _fits_i64(f.tags_code)
        and _fits_i64(f.born_timestamp_ms)
        and _fits_i64(f.prepared_transaction_offset)
    ):
        raise InvalidArgument(f"an integer field of the request does not fit its on-disk width: {f!r:.300}")


def _check_records(topic: str, columns: codec.Columns) -> None:
    """:func:`_check_fields` for every record of a batch, column by column (each check one C-level
    pass); if any fails, record by record for the same first error."""
    _check_topic(topic)
    if codec.BATCHENC is not None and codec.BATCHENC.columns_fit(
        topic.encode(), columns, limits.queue_id_max, limits.body_bytes_max, limits.properties_bytes_max
    ):
        return  # one C pass found every column within bounds (tests/property/test_columns_fit.py)
    (topics, queue_ids, bodies, properties, tags_codes, flags, sys_flags, born_ms, born_hosts, reconsume,
     prepared, _) = columns  # fmt: skip
    if not (
        topics.count(topic.encode()) == len(topics)
        and _within(0, limits.queue_id_max + 1, queue_ids)
        and _longest(bodies) <= limits.body_bytes_max
        and _longest(properties) <= limits.properties_bytes_max
        and b"".join(properties).isascii()  # ASCII pieces are UTF-8 (anything else: checked one by one)
        and _longest(born_hosts) <= 255
        and _within(-_I32, _I32, flags, sys_flags, reconsume)
        and _within_i64(tags_codes, born_ms, prepared)
    ):
        for row in zip(*columns, strict=True):
            _check_fields(topic, _new_tuple(codec.RecordFields, row))


_TOPIC_BYTES: dict[str, bytes] = {}


def _topic_bytes(topic: str) -> bytes:
    """``topic`` encoded, as a record's names part holds it (cached: a read checks each record's)."""
    encoded = _TOPIC_BYTES.get(topic)
    if encoded is None:
        encoded = topic.encode()
        if len(_TOPIC_BYTES) < _VALID_TOPICS_MAX:
            _TOPIC_BYTES[topic] = encoded
    return encoded


# The column checks are loops here, not min/max over maps: compiled, an element costs a few dozen
# instructions against ~300 through builtins.min/max (callgrind: ~3,000 instructions per message of a
# 100-message batch went to them).
def _within(low: int, high: int, *cols: Sequence[int]) -> bool:
    """Every value of every column in ``[low, high)``."""
    for col in cols:
        for value in col:
            if value < low or value >= high:
                return False
    return True


def _within_i64(*cols: Sequence[int]) -> bool:
    """Every value of every column a signed 64-bit integer. Each value is held to the compiled code's
    small-integer range first (compares of C integers; the 64-bit bounds are big integers, each
    compare with them a rich compare of objects, ~10x the instructions), the exact bounds only
    outside it."""
    for col in cols:
        for value in col:
            if (value < -_SHORT or value > _SHORT) and (value < -_I64 or value >= _I64):
                return False
    return True


def _total_len(items: Sequence[Any]) -> int:
    """The sum of ``len`` of ``items`` (a compiled loop: ``sum(map(len, ...))`` costs ~300
    instructions an item through builtins)."""
    total = 0
    for item in items:
        total += len(item)
    return total


def _longest(items: Sequence[Any]) -> int:
    """The greatest ``len`` of ``items`` (0 when empty)."""
    most = 0
    for item in items:
        size = len(item)
        if size > most:
            most = size
    return most


def _check_queue_args(queue_id: int, queue_offset: int, max_count: int) -> None:
    if queue_offset < 0:
        raise InvalidOffset(f"queue offset {queue_offset} is negative")
    if queue_id < 0:
        raise InvalidArgument(f"queue id {queue_id} is negative")
    if max_count <= 0:
        raise InvalidArgument(f"max_count must be positive, got {max_count}")


def _position_status(queue_offset: int, low: int, high: int) -> ReadStatus | None:
    if queue_offset < low:
        return ReadStatus.OFFSET_TOO_SMALL
    if queue_offset == high:
        return ReadStatus.NO_NEW_MESSAGE
    if queue_offset > high:
        return ReadStatus.OFFSET_OVERFLOW
    return None


# NamedTuples made per message by one C call each (fastinit.tuple_maker: tuple.__new__'s object without
# the class's interpreted __new__ and without an argument tuple); Final: compiled code reads C statics
_MAKE_RECORD_FIELDS: Final = tuple_maker(codec.RecordFields)
_MAKE_BATCH_APPEND: Final = tuple_maker(BatchAppend)
