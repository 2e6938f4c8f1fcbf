"""The dispatcher: feeds appended records to the ConsumeQueues and the key index, then tells
arrival listeners. It works from the in-memory entries the CommitLog queued at append (and that
recovery queued from the file), never past ``limit``: in SYNC mode the store passes the flushed
offset, so no consumer is ever served a record that is not durable.
"""

from __future__ import annotations

import logging

from txmq.common.errors import StoreFenced
from txmq.storage.api import ArrivalListener
from txmq.storage.commitlog import BatchEntry, CommitLog
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

    def run_once(self, limit: int) -> int:
        """Dispatch every queued record that ends at or before ``limit``; returns how many."""
        pending = self.log.pending
        touched: dict[tuple[str, int], ConsumeQueue] = {}
        count = 0
        try:
            while pending and pending[0].physical_offset + pending[0].size <= limit:
                entry = pending.popleft()
                if isinstance(entry, BatchEntry):
                    count += self._dispatch_batch(entry, touched)
                    continue
                key = (entry.topic, entry.queue_id)
                queue = touched.get(key) or self.queues.get_or_create(entry.topic, entry.queue_id)
                if queue.put(entry.queue_offset, entry.physical_offset, entry.size, entry.tags_code):
                    touched[key] = queue
                self.index.add(
                    entry.topic, entry.properties, entry.physical_offset, entry.store_ms, entry.index_keys
                )
                count += 1
            if count == 0:
                return 0
            for queue in touched.values():
                queue.write()
            self.index.write()
        except OSError as exc:
            self._abandon(touched)
            self.log.fence(f"writing a ConsumeQueue or the index failed: {exc}")
            raise StoreFenced(f"the store is read-only until restarted: {self.log.fence_reason}") from exc
        except BaseException:
            self._abandon(touched)
            raise
        self.dispatched_offset = entry.physical_offset + entry.size
        for (topic, queue_id), queue in touched.items():
            for listener in self.listeners:
                try:
                    listener(topic, queue_id, queue.max_offset)
                except Exception:  # noqa: BLE001 - a listener's bug must not stop dispatching
                    _LOG.exception("arrival listener %r failed for %s/%d", listener, topic, queue_id)
        return count

    def _dispatch_batch(self, entry: BatchEntry, touched: dict[tuple[str, int], ConsumeQueue]) -> int:
        """A batch's units (one pack when it goes to one queue) and index entries; returns records."""
        if entry.one_queue:
            key = (entry.topics[0], entry.queue_ids[0])
            queue = touched.get(key) or self.queues.get_or_create(*key)
            if queue.put_run(entry.queue_offsets[0], entry.offsets, entry.sizes, entry.tags_codes):
                touched[key] = queue
        else:
            keys = zip(entry.topics, entry.queue_ids, strict=True)
            for key, queue_offset, offset, size, tags_code in zip(
                keys, entry.queue_offsets, entry.offsets, entry.sizes, entry.tags_codes, strict=True
            ):
                queue = touched.get(key) or self.queues.get_or_create(*key)
                if queue.put(queue_offset, offset, size, tags_code):
                    touched[key] = queue
        self.index.add_batch(entry.topics, entry.properties, entry.offsets, entry.store_ms, entry.index_keys)
        return len(entry.offsets)

    @staticmethod
    def _abandon(touched: dict[tuple[str, int], ConsumeQueue]) -> None:
        """A failed dispatch must not leave units buffered in other queues: every later read of those
        queues would trip their invariant. Their records are rebuilt from the log on restart."""
        for queue in touched.values():
            queue.discard_pending()
