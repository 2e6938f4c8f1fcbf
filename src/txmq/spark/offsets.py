"""Per-queue offsets: their canonical form, JSON, read limits and partition planning (pure, no I/O).

An offset map is ``{"<topic>": {"<queue_id>": next_offset}}``: string keys (Spark round-trips offsets
through JSON, so integer keys come back as strings) in one fixed order, topics sorted and queue ids
sorted numerically. Spark compares offsets by their JSON text, so the same positions printed in another
order look like new data and start empty micro-batches; ``canonical`` is therefore applied to every map
handed to Spark. An end offset is exclusive, as in Kafka.

Inside a *requested* map (``startingOffsets`` / ``endingOffsets`` JSON) ``-2`` means the queue's
earliest offset and ``-1`` its latest, as in Kafka's source.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from txmq.common import errors

EARLIEST: Final = -2
LATEST: Final = -1

Offsets = dict[str, dict[str, int]]
QueueKey = tuple[str, int]
Flat = dict[QueueKey, int]


def _queue_id(key: object) -> int:
    text = str(key)
    if not text.isdecimal():
        raise errors.InvalidOffset(f"queue id {key!r} is not a non-negative integer")
    return int(text)


def flatten(offsets: Mapping[str, Mapping[Any, Any]]) -> Flat:
    """``{(topic, queue_id): offset}``; validates shapes (an offset is an int, a queue id a digit string)."""
    if not isinstance(offsets, Mapping):
        raise errors.InvalidOffset(f"offsets must be a JSON object, not {type(offsets).__name__}")
    flat: Flat = {}
    for topic, queues in offsets.items():
        if not isinstance(queues, Mapping):
            raise errors.InvalidOffset(f"offsets of topic {topic!r} must be an object of queue id -> offset")
        for queue, offset in queues.items():
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise errors.InvalidOffset(f"offset of {topic}/{queue} must be an integer, not {offset!r}")
            flat[(str(topic), _queue_id(queue))] = offset
    return flat


def nest(flat: Mapping[QueueKey, int]) -> Offsets:
    """The canonical nested form of ``flat``: topics sorted, queue ids numerically sorted, string keys."""
    result: Offsets = {}
    for topic, queue in sorted(flat):
        result.setdefault(topic, {})[str(queue)] = int(flat[(topic, queue)])
    return result


def canonical(offsets: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    return nest(flatten(offsets))


def to_json(offsets: Mapping[str, Mapping[Any, Any]]) -> str:
    return json.dumps(canonical(offsets))


def from_json(text: str) -> Offsets:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise errors.InvalidOffset(f"offsets are not valid JSON ({exc}): {text[:200]!r}") from None
    return canonical(value)


def resolve(
    requested: Flat | None,
    queues: Iterable[QueueKey],
    low: Mapping[QueueKey, int],
    high: Mapping[QueueKey, int],
    *,
    missing: int,
) -> Flat:
    """Concrete offsets for ``queues``: ``requested`` values with -2/-1 replaced by ``low``/``high``.

    ``requested=None`` applies ``missing`` (``EARLIEST`` or ``LATEST``) to every queue; so does a queue
    the requested map does not name. A requested queue that does not exist is an error, not a silent skip.
    """
    wanted = set(queues)
    if requested:
        unknown = sorted(set(requested) - wanted)
        if unknown:
            raise errors.InvalidOffset(f"offsets name queues that do not exist: {unknown}")
    result: Flat = {}
    for key in sorted(wanted):
        value = (requested or {}).get(key, missing)
        if value == EARLIEST:
            value = low[key]
        elif value == LATEST:
            value = high[key]
        elif value < 0:
            raise errors.InvalidOffset(
                f"offset {value} of {key[0]}/{key[1]} is negative (only -2 and -1 mean)"
            )
        result[key] = value
    return result


def check_start_not_after_end(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> None:
    """A batch read's resolved bounds: InvalidOffset naming every queue whose start is after its end
    (as Kafka's source fails such a range, instead of silently reading nothing from that queue)."""
    bad = sorted(k for k, v in start.items() if k in end and v > end[k])
    if bad:
        shown = ", ".join(f"{t}/{q}: start {start[(t, q)]} > end {end[(t, q)]}" for t, q in bad[:10])
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        raise errors.InvalidOffset(
            f"startingOffsets is after endingOffsets for {len(bad)} queue(s) ({shown}{more}); "
            "give a start at or before the end"
        )


def limit_end(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int], max_rows: int | None) -> Flat:
    """The end of the next micro-batch: ``latest``, cut so that at most ``max_rows`` offsets are read.

    The budget is shared fairly (water-filling): every queue gets an equal share, a queue with less
    available passes the rest on; the remainder of the division goes to the queues with the most left
    to read, so a budget smaller than the number of queues cannot starve the same queues forever. A
    queue whose latest is below its start (its data vanished) keeps ``latest``; ``plan`` reports it.
    """
    available = {key: max(0, latest[key] - start.get(key, latest[key])) for key in latest}
    if max_rows is None or sum(available.values()) <= max_rows:
        return dict(latest)
    take = dict.fromkeys(available, 0)
    budget = max_rows
    order = sorted(available, key=lambda k: (available[k], k))
    for i, key in enumerate(order):
        share = budget // (len(order) - i)
        take[key] = min(available[key], share)
        budget -= take[key]
    for key in sorted(available, key=lambda k: (-(available[k] - take[k]), k)):
        if budget <= 0:
            break
        if take[key] < available[key]:
            take[key] += 1
            budget -= 1
    return {
        key: (start.get(key, latest[key]) + take[key] if available[key] else latest[key]) for key in latest
    }


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue: one Spark partition. ``start == EARLIEST`` for a queue
    that appeared after the previous batch (read it from its first offset)."""

    topic: str
    queue_id: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Loss:
    """A queue whose planned end lies below its start: its messages were deleted or the queue reset."""

    topic: str
    queue_id: int
    start: int
    end: int

    def describe(self) -> str:
        return (
            f"queue {self.topic}/{self.queue_id} went back from offset {self.start} to {self.end}: "
            "messages were deleted or the topic was re-created"
        )


def plan(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> tuple[list[QueueRange], list[Loss]]:
    """One range per queue with something to read between ``start`` and ``end``, in canonical order.

    A queue in ``end`` but not in ``start`` is new: it is read from its earliest offset. A queue in
    ``start`` only (it disappeared) is not read. Equal offsets give no range, so ``start == end`` plans
    nothing, which Spark requires.
    """
    ranges: list[QueueRange] = []
    losses: list[Loss] = []
    for key in sorted(end):
        first = start.get(key, EARLIEST)
        last = end[key]
        if first == EARLIEST:
            if last > 0:
                ranges.append(QueueRange(key[0], key[1], EARLIEST, last))
        elif last < first:
            losses.append(Loss(key[0], key[1], first, last))
        elif last > first:
            ranges.append(QueueRange(key[0], key[1], first, last))
    return ranges, losses


def split(
    ranges: Iterable[QueueRange], *, min_partitions: int | None = None, max_per_partition: int | None = None
) -> list[QueueRange]:
    """Cut ``ranges`` into more, contiguous pieces so that more tasks read in parallel (Kafka's
    ``minPartitions``): every piece holds at most ``max_per_partition`` offsets, and while there are
    fewer than ``min_partitions`` pieces the piece with the most offsets per piece is cut further (never
    below one offset). The pieces of a range cover exactly its offsets, in order, sizes differing by at
    most one. A range of a new queue (``start == EARLIEST``: its size is unknown here) stays whole.
    """
    items = list(ranges)
    counts = [
        1 if r.start == EARLIEST or max_per_partition is None else -(-(r.end - r.start) // max_per_partition)
        for r in items
    ]
    if min_partitions is not None and sum(counts) < min_partitions:
        # the most offsets per piece first; ties by range order, so the plan is a function of the input
        heap = [(-(r.end - r.start) / counts[i], i) for i, r in enumerate(items) if r.start != EARLIEST]
        heapq.heapify(heap)
        total = sum(counts)
        while total < min_partitions and heap:
            _, i = heapq.heappop(heap)
            size = items[i].end - items[i].start
            if counts[i] >= size:
                continue  # one offset per piece already
            counts[i] += 1
            total += 1
            heapq.heappush(heap, (-size / counts[i], i))
    pieces: list[QueueRange] = []
    for r, n in zip(items, counts, strict=True):
        size = r.end - r.start
        for k in range(n):
            first, last = r.start + size * k // n, r.start + size * (k + 1) // n
            pieces.append(QueueRange(r.topic, r.queue_id, first, last))
    return pieces
