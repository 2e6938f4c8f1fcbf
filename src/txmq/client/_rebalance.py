"""Sharing a topic's queues among the members of a consumer group (pure).

Every member computes the same answer from the same sorted inputs, so no coordinator is needed: the
broker only tells each member who the members are (GET_CONSUMER_LIST_BY_GROUP).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def allocate_averagely(me: str, members: Sequence[str], queues: Sequence[T]) -> list[T]:
    """Contiguous, near-equal slices of ``queues`` (in the order given) by member rank.

    The first ``len(queues) % len(members)`` members get one extra queue; with more members than
    queues the last members get none. ``me`` not among ``members`` gets nothing.

    >>> allocate_averagely("b", ["a", "b", "c"], [0, 1, 2, 3, 4])
    [2, 3]
    >>> allocate_averagely("c", ["a", "b", "c"], [0, 1, 2, 3, 4])
    [4]
    """
    ranked = sorted(members)
    if me not in ranked or not queues:
        return []
    index, count, n = ranked.index(me), len(ranked), len(queues)
    if n <= count:
        return [queues[index]] if index < n else []
    base, extra = divmod(n, count)
    size = base + (1 if index < extra else 0)
    start = index * base + min(index, extra)
    return list(queues[start : start + size])
