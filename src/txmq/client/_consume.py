"""What consumers share: listener results, where a new group starts, running listeners, prefetch budget."""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from txmq.common import errors
from txmq.common.message import MessageView

log = logging.getLogger(__name__)


class ConsumeResult(enum.Enum):
    """A listener's verdict on a batch.

    ``SUCCESS``: done, move on. ``RECONSUME_LATER``: redeliver the whole batch later (concurrent
    consumers: through the broker's retry topic; orderly consumers: locally, after
    ``suspend_interval_s``). ``SUSPEND_CURRENT_QUEUE_A_MOMENT`` is the orderly spelling of the same.
    A listener that raises counts as ``RECONSUME_LATER``.
    """

    SUCCESS = "SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "RECONSUME_LATER"  # noqa: PIE796 - an alias


MessageListener = Callable[[list[MessageView]], "ConsumeResult | Awaitable[ConsumeResult]"]


class ConsumeFrom(enum.Enum):
    """Where a group without a committed offset starts on a queue."""

    LAST_OFFSET = "LAST_OFFSET"  # only messages stored from now on (RocketMQ's default)
    FIRST_OFFSET = "FIRST_OFFSET"  # everything still stored
    TIMESTAMP = "TIMESTAMP"  # the first message stored at or after ``consume_timestamp_ms``


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str
    expression: str = "*"


class ListenerRunner:
    """Runs a listener: ``async def`` listeners on the loop, plain functions in a bounded thread pool."""

    def __init__(self, listener: MessageListener, workers: int) -> None:
        if workers < 1:
            raise errors.InvalidArgument("consume_threads must be at least 1")
        self.listener = listener
        self.is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            getattr(listener, "__call__", None)  # noqa: B004 - callable objects with an async __call__
        )
        self.slots = asyncio.Semaphore(workers)
        self._pool = None if self.is_async else concurrent.futures.ThreadPoolExecutor(workers, "txmq-consume")

    async def run(self, messages: list[MessageView]) -> ConsumeResult:
        async with self.slots:
            try:
                if self._pool is None:
                    result = await self.listener(messages)  # type: ignore[misc]
                else:
                    result = await asyncio.get_running_loop().run_in_executor(
                        self._pool, self.listener, messages
                    )
            except Exception:
                log.exception("message listener raised; the batch will be consumed again later")
                return ConsumeResult.RECONSUME_LATER
        if isinstance(result, ConsumeResult):
            return result
        if result is None or result is True:
            return ConsumeResult.SUCCESS
        log.warning("listener returned %r; treating it as RECONSUME_LATER", result)
        return ConsumeResult.RECONSUME_LATER

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)


class PrefetchBudget:
    """Bounds messages held by a consumer (fetched, not yet consumed) by count and bytes."""

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.messages = 0
        self.bytes = 0
        self._room = asyncio.Event()
        self._room.set()

    def add(self, messages: Sequence[MessageView]) -> None:
        self.messages += len(messages)
        self.bytes += sum(len(m.body) for m in messages)
        if self.messages >= self.max_messages or self.bytes >= self.max_bytes:
            self._room.clear()

    def remove(self, messages: Sequence[MessageView]) -> None:
        self.messages -= len(messages)
        self.bytes -= sum(len(m.body) for m in messages)
        if self.messages < self.max_messages and self.bytes < self.max_bytes:
            self._room.set()

    async def wait_for_room(self) -> None:
        await self._room.wait()


def retry_topic_subscription(group: str) -> Subscription:
    from txmq.common import names

    return Subscription(names.retry_topic(group), "*")


Hook = Callable[[], Awaitable[None]]


def quiet(what: str) -> Callable[[BaseException], None]:
    """A logger for errors in background loops that must keep running."""

    def report(exc: BaseException) -> None:
        if isinstance(exc, errors.TxmqError):
            log.debug("%s failed: %s", what, exc)
        else:
            log.exception("%s failed", what, exc_info=exc)

    return report


def unused(*_: Any) -> None:
    """Placeholder for callbacks that need no action."""
