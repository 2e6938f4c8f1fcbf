"""One assigned queue of a push consumer: fetched messages in offset order and the offset to commit.

The committable offset is the smallest offset still being consumed, or the next offset to fetch when
nothing is: committing it never skips a message that has not been consumed (at least once).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from txmq.common.message import MessageQueue, MessageView


@dataclass(eq=False)
class ProcessQueue:
    mq: MessageQueue
    next_offset: int = -1  # next offset to fetch; -1 until resolved
    messages: dict[int, MessageView] = field(default_factory=dict)  # offset -> message, insertion = order
    attempts: dict[int, int] = field(default_factory=dict)  # orderly local retries per offset
    dropped: bool = False
    locked: bool = False
    last_committed: int = -1
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    fetcher: asyncio.Task[None] | None = None

    def add(self, messages: list[MessageView]) -> list[MessageView]:
        """Keep new messages (a redelivered offset already held is ignored); returns those kept."""
        fresh = [m for m in messages if m.queue_offset not in self.messages]
        for message in fresh:
            self.messages[message.queue_offset] = message
        if fresh:
            self.arrived.set()
        return fresh

    def remove(self, messages: list[MessageView]) -> list[MessageView]:
        gone = [m for m in messages if self.messages.pop(m.queue_offset, None) is not None]
        for message in gone:
            self.attempts.pop(message.queue_offset, None)
        if not self.messages:
            self.arrived.clear()
        return gone

    def head(self, count: int) -> list[MessageView]:
        """The first ``count`` messages in offset order (orderly consumption)."""
        ordered = sorted(self.messages)[:count]
        return [self.messages[o] for o in ordered]

    def committable(self) -> int:
        if self.messages:
            return min(self.messages)
        return self.next_offset

    def track(self, task: asyncio.Task[None]) -> None:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
