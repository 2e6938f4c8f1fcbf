"""Long polling: receivers wait on the topics they read; a dispatched record wakes only those waiters."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


class ArrivalWaiters:
    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}
        self.version = 0  # bumped on every arrival: a waiter that saw an older version returns at once

    def notify(self, topic: str, queue_id: int, next_offset: int) -> None:
        self.version += 1
        for event in self._events.get(topic, ()):
            event.set()

    def wake(self, topic: str) -> None:
        """Wake the waiters of ``topic`` although nothing arrived (a FIFO group's next message freed up)."""
        self.version += 1
        for event in self._events.get(topic, ()):
            event.set()

    def wake_all(self) -> None:
        self.version += 1
        for events in self._events.values():
            for event in events:
                event.set()

    async def wait(self, topics: Iterable[str], seen_version: int, timeout_ms: int) -> None:
        if self.version != seen_version:
            return
        event = asyncio.Event()
        watched = list(topics)
        for topic in watched:
            self._events.setdefault(topic, set()).add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), max(0.001, timeout_ms / 1000))
        finally:
            for topic in watched:
                waiters = self._events.get(topic)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._events[topic]
