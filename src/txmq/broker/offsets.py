"""Consumer offsets per (group, topic, queue): the next offset the group will consume.

Updates are in memory and persisted by :meth:`flush` (called periodically and on shutdown), written
atomically. After a crash a group may re-read what it consumed since the last flush: delivery is
at-least-once, never lossy.
"""

from __future__ import annotations

from typing import NamedTuple

from txmq.broker.persist import MetaFiles

_FILE = "consumer_offsets.json"


class OffsetKey(NamedTuple):
    group: str
    topic: str
    queue_id: int


class ConsumerOffsets:
    def __init__(self, meta: MetaFiles) -> None:
        self._meta = meta
        self._offsets: dict[OffsetKey, int] = {}
        self._dirty = False
        for item in meta.load_json(_FILE) or []:
            key = OffsetKey(str(item[0]), str(item[1]), int(item[2]))
            self._offsets[key] = int(item[3])

    def get(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._offsets.get(OffsetKey(group, topic, queue_id))

    def set(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = OffsetKey(group, topic, queue_id)
        if self._offsets.get(key) != offset:
            self._offsets[key] = offset
            self._dirty = True

    def advance(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Set the offset only if it moves forward."""
        key = OffsetKey(group, topic, queue_id)  # one key per call: every ack that moves a base comes here
        current = self._offsets.get(key)
        if current is None or offset > current:
            self._offsets[key] = offset
            self._dirty = True

    def groups(self) -> list[str]:
        return sorted({key.group for key in self._offsets})

    def of_group(self, group: str) -> dict[tuple[str, int], int]:
        return {(k.topic, k.queue_id): v for k, v in self._offsets.items() if k.group == group}

    def delete_group(self, group: str) -> None:
        for key in [k for k in self._offsets if k.group == group]:
            del self._offsets[key]
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        items = [[k.group, k.topic, k.queue_id, v] for k, v in sorted(self._offsets.items())]
        self._meta.save_json(_FILE, items)
        self._dirty = False


def starts_from_zero(
    min_offset: int, first_physical: int | None, max_physical: int, memory_bytes: int, ratio: float
) -> bool:
    """Whether a group with no committed offset for a queue is told 0 (RocketMQ's QUERY_CONSUMER_OFFSET
    rule): the queue still starts at 0, and its first message (``first_physical``; None for an empty
    queue) is within ``ratio`` of the memory from the log's end, as if still in the page cache. Else
    the client chooses by its consume-from setting (latest, earliest or a time)."""
    if min_offset > 0:
        return False
    return first_physical is None or max_physical - first_physical <= memory_bytes * ratio
