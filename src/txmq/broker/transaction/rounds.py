"""Bounded check rounds with a cursor that always advances (pain points #7, #8). No I/O, no clock.

RocketMQ's check loop re-read the same batch forever when one record threw (a corrupt commit log, #8) and
stopped advancing its offsets when a round was interrupted (#7). Here:

* :class:`DueSchedule` holds pending half messages keyed by ``(due_ms, offset)`` in a min-heap, with lazy
  deletion, so finding what is due costs O(due · log pending) and never scans what is not due.
* :func:`plan_round` takes at most ``budget`` due entries strictly **after** the cursor and returns the
  advanced cursor before anything is executed, so an entry that fails (or crashes the round) cannot be
  picked first again: the next round continues after it, and it comes back only in the next sweep.
* :func:`settle_round` turns the round's failures into ``Skipped`` records (offset + reason, for the
  history and logs) and retry times with a capped exponential back-off, so a poison record costs one slot
  per back-off period, never the round.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from txmq.common import limits

from .decide import CheckPolicy


@dataclass(frozen=True, slots=True, order=True)
class DueEntry:
    due_ms: int
    offset: int  # the half message's offset: unique, the tie-breaker


@dataclass(frozen=True, slots=True, order=True)
class RoundCursor:
    """The last ``(due_ms, offset)`` handled in the current sweep; ``START`` before the first."""

    due_ms: int = -1
    offset: int = -1

    def passed(self, entry: DueEntry) -> bool:
        return (entry.due_ms, entry.offset) <= (self.due_ms, self.offset)


START = RoundCursor()


@dataclass(frozen=True, slots=True)
class RoundPlan:
    batch: tuple[DueEntry, ...]
    cursor: RoundCursor  # give this to the next round, whatever happens to the batch
    sweep_complete: bool  # no due entry is left after the cursor: the next round starts a new sweep


def plan_round(
    due: Iterable[DueEntry],
    now_ms: int,
    cursor: RoundCursor = START,
    budget: int = limits.transaction_check_batch_max,
) -> RoundPlan:
    """The next batch: up to ``budget`` entries of ``due`` (ascending) after ``cursor``, due by ``now_ms``."""
    if budget < 1:
        raise ValueError(f"the round budget must be >= 1, not {budget}")
    batch: list[DueEntry] = []
    for entry in due:
        if entry.due_ms > now_ms:
            break
        if cursor.passed(entry):
            continue
        if len(batch) == budget:
            return RoundPlan(tuple(batch), _cursor_at(batch[-1]), sweep_complete=False)
        batch.append(entry)
    return RoundPlan(tuple(batch), START, sweep_complete=True)


def _cursor_at(entry: DueEntry) -> RoundCursor:
    return RoundCursor(entry.due_ms, entry.offset)


@dataclass(frozen=True, slots=True)
class Skipped:
    offset: int
    reason: str
    retry_at_ms: int


def retry_backoff_ms(failures: int, policy: CheckPolicy) -> int:
    """1 s, 2 s, 4 s, ... capped at the check interval (``2 ** n``: RocketMQ's XOR back-off, fixed)."""
    if failures < 1:
        raise ValueError(f"failures must be >= 1, not {failures}")
    backoff_ms: int = 1000 * 2 ** min(failures - 1, 32)
    return min(policy.check_interval_ms, backoff_ms)


def settle_round(
    plan: RoundPlan,
    failures: Mapping[int, str],
    failure_counts: Mapping[int, int],
    now_ms: int,
    policy: CheckPolicy,
) -> tuple[Skipped, ...]:
    """Failed entries of ``plan`` (offset -> reason) as skips with their retry time.

    ``failure_counts`` is how many times in a row each offset has failed, this round included (the service
    keeps that counter and clears it on success). The cursor in ``plan`` stands regardless.
    """
    skipped = []
    for entry in plan.batch:
        reason = failures.get(entry.offset)
        if reason is None:
            continue
        count = max(1, failure_counts.get(entry.offset, 1))
        skipped.append(Skipped(entry.offset, reason, now_ms + retry_backoff_ms(count, policy)))
    return tuple(skipped)


class DueSchedule:
    """Pending half messages by due time: a min-heap with lazy deletion. No I/O, no clock.

    ``set(offset, due_ms)`` (re)schedules, ``set(offset, None)`` forgets; stale heap entries are skipped
    and discarded when they reach the top. Memory is O(pending + reschedules since the last compaction);
    :meth:`compact` rebuilds the heap when stale entries outnumber live ones.
    """

    def __init__(self, entries: Iterable[DueEntry] = ()) -> None:
        self._due: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []
        for entry in entries:
            self._due[entry.offset] = entry.due_ms
        self._heap = [(due, offset) for offset, due in self._due.items()]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, offset: object) -> bool:
        return offset in self._due

    def due_ms(self, offset: int) -> int | None:
        return self._due.get(offset)

    def set(self, offset: int, due_ms: int | None) -> None:
        if due_ms is None:
            self._due.pop(offset, None)
        elif self._due.get(offset) != due_ms:
            self._due[offset] = due_ms
            heapq.heappush(self._heap, (due_ms, offset))
        if len(self._heap) > 2 * len(self._due) + 1024:
            self.compact()

    def compact(self) -> None:
        self._heap = [(due, offset) for offset, due in self._due.items()]
        heapq.heapify(self._heap)

    def next_due_ms(self) -> int | None:
        """When the service must wake next (``None``: nothing pending)."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else None

    def iter_due(self, now_ms: int) -> Iterator[DueEntry]:
        """Live entries due by ``now_ms``, ascending, without removing them: O(k log k) for k visited.

        Consume it (e.g. with :func:`plan_round`) before calling :meth:`set` again.
        """
        self._drop_stale_top()
        heap = self._heap
        frontier: list[tuple[int, int, int]] = [(*heap[0], 0)] if heap else []
        seen: set[int] = set()
        while frontier:
            due, offset, index = heapq.heappop(frontier)
            if due > now_ms:
                return
            if self._due.get(offset) == due and offset not in seen:
                seen.add(offset)
                yield DueEntry(due, offset)
            for child in (2 * index + 1, 2 * index + 2):
                if child < len(heap):
                    heapq.heappush(frontier, (*heap[child], child))

    def _drop_stale_top(self) -> None:
        while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
