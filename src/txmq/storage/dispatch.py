"""The dispatcher: feeds appended records to the ConsumeQueues and the key index, then tells
arrival listeners. It works from the in-memory entries the CommitLog queued at append (and that
recovery queued from the file), never past ``limit``: in SYNC mode the store passes the flushed
offset, so no consumer is ever served a record that is not durable.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence

from txmq.common.errors import StoreFenced
from txmq.storage.api import ArrivalListener
from txmq.storage.commitlog import BatchEntry, CommitLog, DispatchEntry
from txmq.storage.consume_queue import ConsumeQueue, ConsumeQueueSet
from txmq.storage.index import KeyIndex

_LOG = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self, log: CommitLog, queues: ConsumeQueueSet, index: KeyIndex, dispatched_offset: int
    ) -> None:
        self.log = log
        self.queues = queues
        self.index = index
        self.dispatched_offset = dispatched_offset  # end of the last dispatched record
        self.listeners: list[ArrivalListener] = []
        self._run_count = 0  # records of the last run _dispatch_run dispatched

    def run_once(self, limit: int) -> int:
        """Dispatch every queued record that ends at or before ``limit``; returns how many."""
        pending = self.log.pending
        # the queues given units, in the order first given (a queue names itself to the listeners);
        # keyed by the queue object: no (topic, queue id) tuple per record
        touched: dict[ConsumeQueue, None] = {}
        queues = self.queues
        count = 0
        index = self.index
        # the single appends' index keys, gathered and added by one add_rows (before a batch or a
        # run adds its own, and before the index is written: the entries stay in log order)
        rows: list[Sequence[str]] = []
        row_offsets: list[int] = []
        row_stamps: list[int] = []
        try:
            while pending:
                head = pending[0]  # read once (a deque's item is a generic lookup to compiled code)
                if head.physical_offset + head.size > limit:
                    break
                entry = pending.popleft()
                if isinstance(entry, BatchEntry):
                    if rows:
                        index.add_rows(rows, row_offsets, row_stamps)
                        rows, row_offsets, row_stamps = [], [], []
                    count += self._dispatch_batch(entry, touched)
                    continue
                if pending and _follows(pending[0], entry, limit):
                    if rows:
                        index.add_rows(rows, row_offsets, row_stamps)
                        rows, row_offsets, row_stamps = [], [], []
                    entry = self._dispatch_run(entry, pending, limit, touched)
                    count += self._run_count
                    continue
                topic = entry.topic
                physical_offset = entry.physical_offset
                queue = queues.get_or_create(topic, entry.queue_id)
                if queue.put(entry.queue_offset, physical_offset, entry.size, entry.tags_code):
                    touched[queue] = None
                if physical_offset > index.last_offset:  # not a replay (add would skip it)
                    keys = entry.index_keys
                    rows.append(index.keys_fn(topic, entry.properties) if keys is None else keys)
                    row_offsets.append(physical_offset)
                    row_stamps.append(entry.store_ms)
                count += 1
            if count == 0:
                return 0
            if rows:
                index.add_rows(rows, row_offsets, row_stamps)
            for queue in touched:
                queue.write()
            self.index.write()
        except OSError as exc:
            self._abandon(touched)
            self.log.fence(f"writing a ConsumeQueue or the index failed: {exc}")
            raise StoreFenced(f"the store is read-only until restarted: {self.log.fence_reason}") from exc
        except BaseException as exc:
            # a bug (not the disk): the records popped from ``pending`` so far are neither in their
            # queues nor queued any more, so this store can no longer make them visible. Refuse
            # writes until a restart rebuilds the queues and the index from the log, and let the
            # error surface, rather than serve consumers a log with a silent hole.
            self._abandon(touched)
            self.log.fence(f"dispatching appended records failed: {exc!r}")
            raise
        self.dispatched_offset = entry.physical_offset + entry.size
        for queue in touched:
            for listener in self.listeners:
                try:
                    listener(queue.topic, queue.queue_id, queue.max_offset)
                except Exception:  # noqa: BLE001 - a listener's bug must not stop dispatching
                    _LOG.exception(
                        "arrival listener %r failed for %s/%d", listener, queue.topic, queue.queue_id
                    )
        return count

    def _dispatch_run(
        self,
        first: DispatchEntry,
        pending: deque[DispatchEntry | BatchEntry],
        limit: int,
        touched: dict[ConsumeQueue, None],
    ) -> DispatchEntry:
        """Single appends that follow one another in one queue with one store time (pipelined sends
        of a group), dispatched as a batch is: their units packed at once (``put_run``) and their
        index keys added at once (``add_batch``), the same units and entries as one by one. Takes
        ``first`` and the entries after it that follow it; returns the last (``_run_count``: how many)."""
        offsets = [first.physical_offset]
        sizes = [first.size]
        codes = [first.tags_code]
        properties = [first.properties]
        keys = [first.index_keys]
        last = first
        while pending and _follows(pending[0], last, limit):
            last = pending.popleft()  # type: ignore[assignment]  # _follows: a DispatchEntry
            offsets.append(last.physical_offset)
            sizes.append(last.size)
            codes.append(last.tags_code)
            properties.append(last.properties)
            keys.append(last.index_keys)
        queue = self.queues.get_or_create(first.topic, first.queue_id)
        if queue.put_run(first.queue_offset, offsets, sizes, codes):
            touched[queue] = None
        count = len(offsets)
        self.index.add_batch([first.topic] * count, properties, offsets, first.store_ms, keys)
        self._run_count = count
        return last

    def _dispatch_batch(self, entry: BatchEntry, touched: dict[ConsumeQueue, None]) -> int:
        """A batch's units (one pack when it goes to one queue) and index entries; returns records."""
        queues = self.queues
        if entry.one_queue:
            queue = queues.get_or_create(entry.topics[0], entry.queue_ids[0])
            if queue.put_run(entry.queue_offsets[0], entry.offsets, entry.sizes, entry.tags_codes):
                touched[queue] = None
        else:
            for topic, queue_id, queue_offset, offset, size, tags_code in zip(
                entry.topics, entry.queue_ids, entry.queue_offsets, entry.offsets, entry.sizes,
                entry.tags_codes, strict=True,
            ):  # fmt: skip
                queue = queues.get_or_create(topic, queue_id)
                if queue.put(queue_offset, offset, size, tags_code):
                    touched[queue] = None
        self.index.add_batch(entry.topics, entry.properties, entry.offsets, entry.store_ms, entry.index_keys)
        return len(entry.offsets)

    @staticmethod
    def _abandon(touched: dict[ConsumeQueue, None]) -> None:
        """A failed dispatch must not leave units buffered in other queues: every later read of those
        queues would trip their invariant. Their records are rebuilt from the log on restart."""
        for queue in touched:
            queue.discard_pending()


def _follows(entry: DispatchEntry | BatchEntry, previous: DispatchEntry, limit: int) -> bool:
    """Whether ``entry`` is a single append due by ``limit`` right after ``previous`` in its queue (the
    next queue offset) with the same store time: the two can be dispatched as one run."""
    return (
        not isinstance(entry, BatchEntry)
        and entry.physical_offset + entry.size <= limit
        and entry.queue_offset == previous.queue_offset + 1
        and entry.queue_id == previous.queue_id
        and entry.store_ms == previous.store_ms
        and entry.topic == previous.topic
    )
