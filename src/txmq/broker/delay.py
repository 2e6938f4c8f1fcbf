"""Delivery of delayed messages when they are due.

* Delay levels (4.x): ``SCHEDULE_TOPIC_XXXX``, queue = level - 1. Within one level every message has the
  same delay, so delivery times grow with the queue offset: a cursor per level delivers the prefix that
  is due.
* Delivery timestamps (5.x): the timer topic has one queue per minute of the delay window
  (queue = minute mod queues). When a minute begins, that minute's queue is loaded (only what is due in
  that minute lives in memory), sorted by time and delivered as it comes due.

Pending delayed messages cost disk, not memory. Cursors are persisted; after a restart the service
catches up every minute it missed. A recalled message is skipped. ``tick(now_ms)`` is the step function.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from txmq.broker.persist import MetaFiles
from txmq.broker.reput import to_real_topic
from txmq.broker.send import TIMER_BUCKET_MS
from txmq.common import names
from txmq.common import properties as props
from txmq.common.errors import CorruptRecord, StorageError
from txmq.storage.api import QueueUnit, StoredRecord
from txmq.storage.store import MessageStore

log = logging.getLogger(__name__)
_FILE = "delay_cursors.json"
_UNITS_PER_READ = 256


class DelayService:
    def __init__(
        self,
        store: MessageStore,
        meta: MetaFiles,
        *,
        levels: int,
        timer_queues: int,
        now_ms: int,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._store = store
        self._meta = meta
        self._levels = levels
        self._timer_queues = timer_queues
        saved = meta.load_json(_FILE) or {}
        self._level_cursor: dict[int, int] = {int(k): int(v) for k, v in saved.get("levels", {}).items()}
        self._minute: int = int(saved.get("minute", now_ms // TIMER_BUCKET_MS))
        self._timer_cursor: dict[int, int] = {int(k): int(v) for k, v in saved.get("timer", {}).items()}
        self._recalled: set[int] = {int(x) for x in saved.get("recalled", [])}
        # bucket queue -> heap of (deliver ms, physical offset, size, queue offset)
        self._loaded: dict[int, list[tuple[int, int, int, int]]] = {}
        self._loaded_to: dict[int, int] = {}
        self._dirty = False
        self._on_error = on_error
        self.delivered = 0

    # ---- public -------------------------------------------------------------------------------
    async def tick(self, now_ms: int, budget: int = 2_000) -> int:
        """Deliver what is due at ``now_ms``; at most ``budget`` messages. Returns how many moved."""
        moved = 0
        for level in range(self._levels):
            moved += await self._tick_level(level, now_ms, budget - moved)
        moved += await self._tick_timer(now_ms, budget - moved)
        if self._dirty:
            self.save()
        return moved

    def recall(self, physical_offset: int) -> None:
        self._recalled.add(physical_offset)
        self._dirty = True
        self.save()

    def is_recalled(self, physical_offset: int) -> bool:
        return physical_offset in self._recalled

    def save(self) -> None:
        self._meta.save_json(
            _FILE,
            {
                "levels": {str(k): v for k, v in self._level_cursor.items()},
                "minute": self._minute,
                "timer": {str(k): v for k, v in self._timer_cursor.items()},
                "recalled": sorted(self._recalled),
            },
        )
        self._dirty = False

    def pending_hint(self) -> int:
        """Messages loaded in memory waiting for their second (bounded by one minute of traffic)."""
        return sum(len(h) for h in self._loaded.values())

    # ---- delay levels -------------------------------------------------------------------------
    async def _tick_level(self, level: int, now_ms: int, budget: int) -> int:
        moved = 0
        cursor = self._level_cursor.get(level, self._store.min_offset(names.SCHEDULE_TOPIC, level))
        while moved < budget:
            units = self._store.queue_units(names.SCHEDULE_TOPIC, level, cursor, min(_UNITS_PER_READ, budget))
            if not units:
                break
            for unit in units:
                if unit.tags_code > now_ms:
                    self._set_level_cursor(level, cursor)
                    return moved
                await self._deliver(unit)
                cursor = unit.queue_offset + 1
                moved += 1
                self._set_level_cursor(level, cursor)  # before the next delivery can fail
        return moved

    def _set_level_cursor(self, level: int, cursor: int) -> None:
        if self._level_cursor.get(level) != cursor:
            self._level_cursor[level] = cursor
            self._dirty = True

    # ---- timer (delivery timestamps) ----------------------------------------------------------
    async def _tick_timer(self, now_ms: int, budget: int) -> int:
        moved = 0
        current = now_ms // TIMER_BUCKET_MS
        # Load every minute from the saved one up to the current one (catching up after downtime) and the
        # next minute too, so nothing that is due before the next tick is left behind.
        minute = self._minute
        while minute <= current + 1 and moved < budget:
            queue = minute % self._timer_queues
            self._load_bucket(queue)
            moved += await self._drain_bucket(queue, now_ms, budget - moved)
            if minute < current and not self._loaded.get(queue) and self._bucket_done(queue):
                self._minute = minute + 1
                self._dirty = True
            minute += 1
        return moved

    def _load_bucket(self, queue: int) -> None:
        start = self._loaded_to.get(queue)
        if start is None:
            start = self._timer_cursor.get(queue, self._store.min_offset(names.TIMER_TOPIC, queue))
        heap = self._loaded.setdefault(queue, [])
        while True:
            units = self._store.queue_units(names.TIMER_TOPIC, queue, start, _UNITS_PER_READ)
            if not units:
                break
            for unit in units:
                heapq.heappush(heap, (unit.tags_code, unit.physical_offset, unit.size, unit.queue_offset))
            start = units[-1].queue_offset + 1
        self._loaded_to[queue] = start

    def _bucket_done(self, queue: int) -> bool:
        return self._loaded_to.get(queue, 0) >= self._store.max_offset(names.TIMER_TOPIC, queue)

    async def _drain_bucket(self, queue: int, now_ms: int, budget: int) -> int:
        heap = self._loaded.get(queue, [])
        moved = 0
        while heap and heap[0][0] <= now_ms and moved < budget:
            entry = heapq.heappop(heap)
            deliver_ms, physical, size, queue_offset = entry
            try:
                await self._deliver(QueueUnit(queue_offset, physical, size, deliver_ms))
            except BaseException:
                heapq.heappush(heap, entry)  # not delivered: it stays due (and the cursor stays before it)
                raise
            moved += 1
        if not heap:
            cursor = self._loaded_to.get(queue, 0)
            if self._timer_cursor.get(queue) != cursor:
                self._timer_cursor[queue] = cursor
                self._dirty = True
        return moved

    # ---- delivery -----------------------------------------------------------------------------
    async def _deliver(self, unit: QueueUnit) -> None:
        """Move one due message to its real topic. A poison record (unreadable, or rejected by the
        store's validation) is skipped and reported; a storage failure (disk full, fenced store)
        propagates so the caller's cursor stays before the message and the next tick retries it:
        skipping it would lose an acknowledged message."""
        if unit.physical_offset in self._recalled:
            self._recalled.discard(unit.physical_offset)
            self._dirty = True
            return
        try:
            record: StoredRecord = self._store.read(unit.physical_offset)
            decoded = props.decode(record.properties)
            request = to_real_topic(record, decoded)
            await self._store.put(request)
            self.delivered += 1
        except StorageError as exc:
            if isinstance(exc, CorruptRecord):
                self._poison(unit, exc)
                return
            raise
        except Exception as exc:  # noqa: BLE001 - a poison record must not stop every other delivery
            self._poison(unit, exc)

    def _poison(self, unit: QueueUnit, exc: Exception) -> None:
        reason = f"delayed message at offset {unit.physical_offset} could not be delivered: {exc}"
        log.error(reason)
        if self._on_error is not None:
            self._on_error(reason)
