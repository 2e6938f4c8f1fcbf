"""Delivery of delayed messages when they are due.

* Delay levels (4.x): ``SCHEDULE_TOPIC_XXXX``, queue = level - 1. Within one level every message has the
  same delay, so delivery times grow with the queue offset: a cursor per level delivers the prefix that
  is due.
* Delivery timestamps (5.x): the timer topic has one queue per minute of the delay window
  (queue = minute mod queues). When a minute begins, that minute's queue is loaded (only what is due in
  that minute lives in memory), sorted by time and delivered as it comes due.

Pending delayed messages cost disk, not memory. Cursors are persisted; after a restart the service
catches up every minute it missed. A recalled message is skipped. ``tick(now_ms)`` is the step function.

Exactly once across a crash: each delivered copy carries the log offset of the delayed record it came
from (its ``prepared_transaction_offset``; a copy is no transaction, its sys flag says so). The cursors
file also saves ``scan_from``, a log offset at or before every copy the saved cursors do not cover yet
(the delivery in progress, a timer bucket's deliveries before its cursor moves). A restart reads the log
from there and skips the delayed records whose copies it finds, instead of delivering them again.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
from collections.abc import Callable

from txmq.broker.persist import MetaFiles
from txmq.broker.reput import to_real_topic
from txmq.broker.send import TIMER_BUCKET_MS
from txmq.common import names
from txmq.common import properties as props
from txmq.common.errors import CorruptRecord, StorageError
from txmq.common.message import TRANSACTION_MASK
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
        # delayed record's offset -> its copy's offset, for copies the saved cursors do not cover
        self._delivered: dict[int, int] = {}
        self._bucket_copies: dict[int, int] = {}  # timer queue -> first copy before its cursor moves
        self._putting_at: int | None = None  # the log's end when the delivery in progress began
        self._marked = "scan_from" in saved  # else save one before the first delivery
        if self._marked:
            copies = delivered_copies(store, int(saved["scan_from"]))
            self._delivered = {src: at for src, at in copies.items() if self._uncovered(src)}
        # bucket queue -> heap of (deliver ms, physical offset, size, queue offset)
        self._loaded: dict[int, list[tuple[int, int, int, int]]] = {}
        self._loaded_to: dict[int, int] = {}
        self._dirty = False
        self._on_error = on_error
        self.delivered = 0

    # ---- public -------------------------------------------------------------------------------
    async def tick(self, now_ms: int, budget: int = 2_000) -> int:
        """Deliver what is due at ``now_ms``; at most ``budget`` messages. Returns how many moved."""
        if not self._marked:
            self.save()
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
                "scan_from": self._scan_from(),
            },
        )
        self._dirty = False
        self._marked = True

    def _uncovered(self, source: int) -> bool:
        """Whether the delayed record at ``source`` lies at or past its queue's saved cursor (a copy
        of one before it is covered already, and the cursor never comes back to it)."""
        try:
            record = self._store.read(source)
        except StorageError:
            return False  # gone with its segment: never delivered again either
        if record.topic == names.SCHEDULE_TOPIC:
            cursor = self._level_cursor.get(record.queue_id)
        elif record.topic == names.TIMER_TOPIC:
            cursor = self._timer_cursor.get(record.queue_id)
        else:
            return False
        if cursor is None:
            cursor = self._store.min_offset(record.topic, record.queue_id)
        return record.queue_offset >= cursor

    def _scan_from(self) -> int:
        """A log offset at or before every copy the cursors being saved do not cover."""
        marks = [self._store.max_physical_offset, *self._delivered.values(), *self._bucket_copies.values()]
        if self._putting_at is not None:
            marks.append(self._putting_at)
        return min(marks)

    def pending_hint(self) -> int:
        """Messages loaded in memory waiting for their second (bounded by one minute of traffic)."""
        return sum(len(h) for h in self._loaded.values())

    # ---- delay levels -------------------------------------------------------------------------
    async def _tick_level(self, level: int, now_ms: int, budget: int) -> int:
        moved = 0
        cursor = self._level_cursor.get(level, self._store.min_offset(names.SCHEDULE_TOPIC, level))
        while moved < budget:
            units = self._store.checked_units(
                names.SCHEDULE_TOPIC, level, cursor, min(_UNITS_PER_READ, budget)
            )
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
            units = self._store.checked_units(names.TIMER_TOPIC, queue, start, _UNITS_PER_READ)
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
                copy = await self._deliver(QueueUnit(queue_offset, physical, size, deliver_ms))
            except BaseException:
                heapq.heappush(heap, entry)  # not delivered: it stays due (and the cursor stays before it)
                raise
            if copy is not None:
                self._bucket_copies.setdefault(queue, copy)
            moved += 1
        if not heap:
            cursor = self._loaded_to.get(queue, 0)
            self._bucket_copies.pop(queue, None)
            if self._timer_cursor.get(queue) != cursor:
                self._timer_cursor[queue] = cursor
                self._dirty = True
        return moved

    # ---- delivery -----------------------------------------------------------------------------
    async def _deliver(self, unit: QueueUnit) -> int | None:
        """Move one due message to its real topic; the copy's log offset (None: nothing written).
        A poison record (unreadable, or rejected by the store's validation) is skipped and reported;
        a storage failure (disk full, fenced store) propagates so the caller's cursor stays before the
        message and the next tick retries it: skipping it would lose an acknowledged message. A
        message whose copy the log already holds (delivered just before a crash) is not copied again."""
        if unit.physical_offset in self._recalled:
            self._recalled.discard(unit.physical_offset)
            self._delivered.pop(unit.physical_offset, None)
            self._dirty = True
            return None
        if unit.physical_offset in self._delivered:
            self._dirty = True
            return self._delivered.pop(unit.physical_offset)
        self._putting_at = self._store.max_physical_offset
        try:
            record: StoredRecord = self._store.read(unit.physical_offset)
            decoded = props.decode(record.properties)
            request = dataclasses.replace(
                to_real_topic(record, decoded), prepared_transaction_offset=unit.physical_offset
            )
            appended = await self._store.put(request)
            self.delivered += 1
            return appended.physical_offset
        except StorageError as exc:
            if isinstance(exc, CorruptRecord):
                self._poison(unit, exc)
                return None
            raise
        except Exception as exc:  # noqa: BLE001 - a poison record must not stop every other delivery
            self._poison(unit, exc)
            return None
        finally:
            self._putting_at = None

    def _poison(self, unit: QueueUnit, exc: Exception) -> None:
        reason = f"delayed message at offset {unit.physical_offset} could not be delivered: {exc}"
        log.error(reason)
        if self._on_error is not None:
            self._on_error(reason)


def delivered_copies(store: MessageStore, scan_from: int) -> dict[int, int]:
    """The delayed records whose copies the log holds from ``scan_from`` on: {record offset: copy
    offset}. A copy is a record with a ``prepared_transaction_offset`` that is no transaction (commits
    carry their half's offset with a transaction flag; nothing else sets the field)."""
    found: dict[int, int] = {}
    for record in store.records_from(scan_from):
        source = record.prepared_transaction_offset
        if source > 0 and not record.sys_flag & TRANSACTION_MASK:
            found.setdefault(source, record.physical_offset)
    return found
