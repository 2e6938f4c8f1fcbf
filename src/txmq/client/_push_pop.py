"""The POP side of ``PushConsumer``: what it does over a transport without offsets pulls and send-back (gRPC).

Per subscribed topic one task long-polls ``receive`` (bounded by the prefetch budget) and hands the
messages to the listener:

* concurrently, in batches of ``consume_message_batch_max_size``: SUCCESS acks each message; a failure
  nacks it by changing its invisible duration to the group's back-off for that delivery attempt (the
  schedule the server sent in its settings reply), so the server redelivers it with ``delivery_attempt``
  + 1; once ``delivery_attempt`` exceeds ``max_reconsume_times`` it is forwarded to ``%DLQ%<group>``.
* orderly: messages are split by message group (by queue when they have none) and each group's messages
  run one batch at a time, in order; a failure retries the same batch locally after
  ``suspend_interval_s`` (keeping it invisible meanwhile), then forwards it to the DLQ. Across receives the
  order holds because a FIFO topic's server hands out a group's next message only after the previous one
  is acked: orderly consumption over gRPC needs a FIFO topic (queue locks are remoting-only).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from txmq.client._consume import ConsumeResult, Subscription
from txmq.common import errors
from txmq.common.message import MessageView

if TYPE_CHECKING:
    from txmq.client._push import PushConsumer

log = logging.getLogger(__name__)
ORDERLY_WAIT_MS = 500


@runtime_checkable
class PopExtras(Protocol):
    """What a POP transport offers beyond ``Transport`` (``GrpcTransport`` has both)."""

    def retry_backoff_ms(self, group: str, attempt: int) -> int: ...

    async def forward_to_dlq(self, group: str, message: MessageView, *, max_attempts: int) -> None: ...


class PopDriver:
    """Runs one ``PushConsumer`` over receive / ack / change-invisible-duration; see the module docstring."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self.transport = consumer.transport
        self.extras = self.transport if isinstance(self.transport, PopExtras) else None
        self._working: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        for sub in self.consumer.subscriptions.values():
            self.consumer._spawn(self._receive_loop(sub))

    def _work(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._working.add(task)
        task.add_done_callback(_finished)
        task.add_done_callback(self._working.discard)

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Let listener calls in progress finish and be acked or nacked (``close`` calls this)."""
        if self._working:
            await asyncio.wait(list(self._working), timeout=timeout_s)

    async def _receive_loop(self, sub: Subscription) -> None:
        c = self.consumer
        failures = 0
        while True:
            await c.budget.wait_for_room()
            try:
                messages = await self.transport.receive(
                    c.group, sub.topic, sub.expression, max_messages=c.pull_batch_size,
                    invisible_ms=round(c.invisible_duration_s * 1000), wait_ms=self._wait_ms(),
                )  # fmt: skip
            except errors.TxmqError as exc:
                log.debug("receive from %s failed: %s", sub.topic, exc)
                await asyncio.sleep(c._backoff.delay_s(failures))
                failures += 1
                continue
            failures = 0
            if not messages:
                continue
            c.budget.add(messages)
            if c.orderly:
                for run in _by_group(messages).values():
                    self._work(self._consume_in_order(run))
            else:
                size = c.consume_message_batch_max_size
                for start in range(0, len(messages), size):
                    self._work(self._consume(messages[start : start + size]))

    def _wait_ms(self) -> int:
        """Orderly polls wait at most ``ORDERLY_WAIT_MS``: txmq's broker wakes a waiting receive when a
        message arrives, not when an ack frees a FIFO group's next message."""
        c = self.consumer
        return min(c.long_poll_ms, ORDERLY_WAIT_MS) if c.orderly else c.long_poll_ms

    async def _consume(self, chunk: list[MessageView]) -> None:
        c = self.consumer
        assert c._runner is not None
        try:
            if await c._runner.run(chunk) is ConsumeResult.SUCCESS:
                await self._ack(chunk)
            else:
                for message in chunk:
                    await self._nack(message)
        finally:
            c.budget.remove(chunk)

    async def _consume_in_order(self, run: list[MessageView]) -> None:
        c = self.consumer
        assert c._runner is not None
        size = c.consume_message_batch_max_size
        try:
            for start in range(0, len(run), size):
                chunk = run[start : start + size]
                attempts = 0
                held_since = time.monotonic()
                while await c._runner.run(chunk) is not ConsumeResult.SUCCESS:
                    attempts += 1
                    if attempts > c.max_reconsume_times:
                        for message in chunk:
                            await self._dead_letter(message)
                        break
                    if time.monotonic() - held_since > c.invisible_duration_s / 2:
                        chunk = await self._keep_invisible(chunk)
                        held_since = time.monotonic()
                    await asyncio.sleep(c.suspend_interval_s)
                else:
                    await self._ack(chunk)
        finally:
            c.budget.remove(run)

    async def _ack(self, chunk: Sequence[MessageView]) -> None:
        for message in chunk:
            try:
                await self.transport.ack(self.consumer.group, message)
            except errors.TxmqError as exc:  # expired handle: the server redelivers it
                log.warning("ack of %s failed: %s", message.message_id, exc)

    async def _nack(self, message: MessageView) -> None:
        c = self.consumer
        if message.delivery_attempt > c.max_reconsume_times:
            await self._dead_letter(message)
            return
        attempt = message.delivery_attempt
        delay_ms = self.extras.retry_backoff_ms(c.group, attempt) if self.extras else 1000 * attempt
        try:
            await self.transport.change_invisible_duration(c.group, message, max(1000, delay_ms))
        except errors.TxmqError as exc:  # the invisibility runs out anyway: redelivered later
            log.warning("nack of %s failed: %s", message.message_id, exc)

    async def _dead_letter(self, message: MessageView) -> None:
        c = self.consumer
        if self.extras is None:
            log.warning("%s used up its retries; the server dead-letters it", message.message_id)
            return
        try:
            await self.extras.forward_to_dlq(c.group, message, max_attempts=c.max_reconsume_times + 1)
        except errors.TxmqError as exc:
            log.warning("forwarding %s to the DLQ failed: %s", message.message_id, exc)

    async def _keep_invisible(self, chunk: list[MessageView]) -> list[MessageView]:
        """Renew the invisibility of a batch retried locally for long (new receipt handles)."""
        renewed = []
        invisible_ms = round(self.consumer.invisible_duration_s * 1000)
        for message in chunk:
            try:
                message = await self.transport.change_invisible_duration(
                    self.consumer.group, message, invisible_ms
                )
            except errors.TxmqError as exc:
                log.debug("renewing %s failed: %s", message.message_id, exc)
            renewed.append(message)
        return renewed


def _finished(task: asyncio.Task[None]) -> None:
    """Log what a consumption task raised (a bug: listener errors are already caught)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("consuming a batch failed", exc_info=task.exception())


def _by_group(messages: Sequence[MessageView]) -> dict[str, list[MessageView]]:
    runs: dict[str, list[MessageView]] = {}
    for message in messages:
        key = message.message_group or f"{message.topic}:{message.queue_id}"
        runs.setdefault(key, []).append(message)
    for run in runs.values():
        run.sort(key=lambda m: (m.queue_id, m.queue_offset))
    return runs
