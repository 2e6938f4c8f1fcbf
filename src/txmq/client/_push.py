"""``PushConsumer``: a listener called with batches of messages, concurrently or strictly in order.

Over remoting (offset model): the group's members share each subscribed topic's queues
(``allocate_averagely`` over GET_CONSUMER_LIST_BY_GROUP, recomputed every ``rebalance_interval_s``);
each assigned queue has a fetch task (long-polling PULL_MESSAGE, paused while the prefetch budget of
``max_cached_messages`` / ``max_cached_bytes`` is full) and offsets are committed every
``commit_interval_s`` and when a queue is handed over.

* Concurrent: batches of up to ``consume_message_batch_max_size`` run on ``consume_threads`` workers;
  ``RECONSUME_LATER`` sends each message back (CONSUMER_SEND_MSG_BACK) to ``%RETRY%<group>``, which the
  consumer also reads; after ``max_reconsume_times`` the broker moves it to ``%DLQ%<group>``.
* Orderly: a queue is consumed only while this member holds its lock (LOCK_BATCH_MQ, renewed each
  rebalance), one batch at a time in offset order; ``RECONSUME_LATER`` retries the same batch locally
  after ``suspend_interval_s``, up to ``max_reconsume_times``, then sends it to the DLQ.

Over gRPC (POP model) see ``_push_pop``: receive, ack, and nack by changing the invisible duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from txmq.client._backoff import Backoff, ClientStatus
from txmq.client._consume import (
    ConsumeFrom,
    ConsumeResult,
    ListenerRunner,
    MessageListener,
    PrefetchBudget,
    Subscription,
    retry_topic_subscription,
)
from txmq.client._factory import TransportName, make_transport
from txmq.client._process_queue import ProcessQueue
from txmq.client._rebalance import allocate_averagely
from txmq.client._transport import (
    BEGINNING,
    END,
    ConsumeMode,
    ConsumerInfo,
    Feature,
    PullStatus,
    Transport,
    at_timestamp,
)
from txmq.common import errors, limits, names
from txmq.common.message import MessageQueue, MessageView

log = logging.getLogger(__name__)


class PushConsumer:
    """Calls ``listener(messages) -> ConsumeResult`` for every message of the subscribed topics.

    ::

        def on_messages(msgs):
            for m in msgs:
                print(m.topic, m.tags, m.body)
            return ConsumeResult.SUCCESS

        consumer = PushConsumer("billing", "127.0.0.1:9876", listener=on_messages)
        consumer.subscribe("orders", "created || paid")
        async with consumer:
            await asyncio.sleep(60)
    """

    def __init__(
        self,
        group: str,
        endpoints: str = "127.0.0.1:9876",
        *,
        listener: MessageListener | None = None,
        transport: TransportName | Transport = "remoting",
        orderly: bool = False,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        consume_threads: int = 4,
        max_reconsume_times: int = 16,
        retry_delay_level: int = 0,
        suspend_interval_s: float = 1.0,
        max_cached_messages: int = 1024,
        max_cached_bytes: int = 64 * limits.MiB,
        consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET,
        consume_timestamp_ms: int = 0,
        long_poll_ms: int = 5_000,
        rebalance_interval_s: float = 5.0,
        commit_interval_s: float = 1.0,
        request_timeout_s: float = 3.0,
        invisible_duration_s: float = 30.0,
    ) -> None:
        names.validate_group(group)
        if not 1 <= consume_message_batch_max_size <= 1024:
            raise errors.InvalidArgument("consume_message_batch_max_size must be in 1..1024")
        if not 1 <= pull_batch_size <= limits.pull_batch_max:
            raise errors.InvalidArgument(f"pull_batch_size must be in 1..{limits.pull_batch_max}")
        if max_reconsume_times < 0:
            raise errors.InvalidArgument("max_reconsume_times must be >= 0")
        self.group = group
        self.listener = listener
        self.orderly = orderly
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.consume_threads = consume_threads
        self.max_reconsume_times = max_reconsume_times
        self.retry_delay_level = retry_delay_level
        self.suspend_interval_s = suspend_interval_s
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self.long_poll_ms = long_poll_ms
        self.rebalance_interval_s = rebalance_interval_s
        self.commit_interval_s = commit_interval_s
        self.invisible_duration_s = invisible_duration_s
        self.transport = make_transport(endpoints, transport, request_timeout_s=request_timeout_s)
        self._owns_transport = isinstance(transport, str)
        self.subscriptions: dict[str, Subscription] = {}
        self.budget = PrefetchBudget(max_cached_messages, max_cached_bytes)
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: ListenerRunner | None = None
        self._backoff = Backoff(initial_s=0.1, max_s=3.0)
        self._rebalance_lock = asyncio.Lock()
        self._locked: set[MessageQueue] = set()
        self._pop: Any = None  # the POP driver (gRPC), see ``_push_pop``
        self.status = ClientStatus.CREATED

    # ---- configuration ------------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic``'s messages whose tag matches ``expression`` (``"*"``, ``"a || b"``)."""
        names.validate_topic(topic)
        self.subscriptions[topic] = Subscription(topic, expression or "*")

    def register_listener(self, listener: MessageListener) -> None:
        self.listener = listener

    def _info(self) -> ConsumerInfo:
        subs = {s.topic: s.expression for s in self._all_subscriptions()}
        return ConsumerInfo(
            self.group, subs, ConsumeMode.PUSH, fifo=self.orderly, max_attempts=self.max_reconsume_times + 1
        )

    def _all_subscriptions(self) -> list[Subscription]:
        subs = list(self.subscriptions.values())
        if not self.orderly and self.transport.supports(Feature.SEND_BACK):
            subs.append(retry_topic_subscription(self.group))
        return subs

    # ---- life cycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Register the group and start consuming (also done by ``async with``)."""
        if self.status is ClientStatus.RUNNING:
            return
        if self.listener is None or not self.subscriptions:
            raise errors.InvalidArgument("set a listener and subscribe to at least one topic before start()")
        self._runner = ListenerRunner(self.listener, self.consume_threads)
        await self.transport.start()
        await self.transport.register_consumer(self._info())
        self.status = ClientStatus.RUNNING
        if not self.transport.supports(Feature.SEND_BACK) and self.transport.supports(Feature.POP):
            from txmq.client._push_pop import PopDriver

            self._pop = PopDriver(self)
            self._pop.start()  # gRPC: receive / ack / nack by invisible duration
            return
        if not (self.transport.supports(Feature.PULL) and self.transport.supports(Feature.SEND_BACK)):
            raise errors.Unsupported(f"PushConsumer needs offset pulls and send-back ({self.transport.name})")
        # The first assignment, with its start offsets, is settled before start() returns: a message
        # sent after that reaches this group even under consume_from=LAST_OFFSET (resolving the end
        # lazily in the fetcher raced with the caller's first sends and skipped them).
        await self._rebalance_once()
        self._spawn(self._rebalance_loop())
        self._spawn(self._commit_loop())

    async def close(self) -> None:
        """Stop fetching, let running listener calls finish, commit offsets, unregister, disconnect."""
        if self.status is not ClientStatus.RUNNING:
            return
        self.status = ClientStatus.CLOSING
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._pop is not None:
            await self._pop.drain()
        await asyncio.gather(*(self._drop(pq) for pq in list(self._queues.values())), return_exceptions=True)
        with contextlib.suppress(errors.TxmqError):
            await self.transport.unregister_consumer(self.group)
        if self._owns_transport:
            await self.transport.close()
        if self._runner is not None:
            self._runner.close()
        self.status = ClientStatus.CLOSED

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _spawn(self, coro: Any, pq: ProcessQueue | None = None) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        if pq is not None:
            pq.track(task)
        else:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return task

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this member consumes now (orderly: only those it holds locked)."""
        return sorted(
            (mq for mq, pq in self._queues.items() if pq.locked or not self.orderly),
            key=lambda mq: (mq.topic, mq.broker_name, mq.queue_id),
        )

    # ---- rebalancing --------------------------------------------------------------------------------
    async def _rebalance_loop(self) -> None:
        """Rebalance every ``rebalance_interval_s`` after the first pass, which ``start()`` awaits."""
        while True:
            await asyncio.sleep(self.rebalance_interval_s)
            await self._rebalance_once()

    async def _rebalance_once(self) -> None:
        try:
            await self.rebalance()
        except errors.TxmqError as exc:
            log.debug("rebalance of %s failed: %s", self.group, exc)

    async def rebalance(self) -> None:
        """Recompute this member's queues now (it also runs every ``rebalance_interval_s``)."""
        async with self._rebalance_lock:
            wanted: dict[MessageQueue, Subscription] = {}
            for sub in self._all_subscriptions():
                queues = await self.transport.route(sub.topic, for_write=False)
                members = await self.transport.consumer_ids(self.group, sub.topic)
                if self.transport.client_id not in members:
                    members = [*members, self.transport.client_id]
                ordered = sorted(queues, key=lambda q: (q.broker_name, q.queue_id))
                for mq in allocate_averagely(self.transport.client_id, members, ordered):
                    wanted[mq] = sub
            for mq in [mq for mq in self._queues if mq not in wanted]:
                await self._drop(self._queues.pop(mq))
            if self.orderly:
                await self._relock(list(wanted))
            new = [
                (mq, sub)
                for mq, sub in wanted.items()
                if mq not in self._queues and (not self.orderly or mq in self._locked)
            ]
            starts = await asyncio.gather(*(self._start_offset_or_unresolved(mq) for mq, _ in new))
            for (mq, sub), start in zip(new, starts, strict=True):
                self._add(mq, sub, start)

    async def _relock(self, wanted: Sequence[MessageQueue]) -> None:
        self._locked = await self.transport.lock_queues(self.group, wanted) if wanted else set()
        for mq, pq in list(self._queues.items()):
            pq.locked = mq in self._locked
            if not pq.locked:
                log.info("lost the lock of %s; stop consuming it", mq)
                await self._drop(self._queues.pop(mq), unlock=False)

    def _add(self, mq: MessageQueue, sub: Subscription, start: int = -1) -> None:
        pq = ProcessQueue(mq, next_offset=start, locked=self.orderly)
        self._queues[mq] = pq
        pq.fetcher = self._spawn(self._fetch_loop(pq, sub), pq)
        if self.orderly:
            self._spawn(self._orderly_loop(pq), pq)

    async def _drop(self, pq: ProcessQueue, *, unlock: bool = True) -> None:
        """Stop a queue: cancel fetching, wait for listener calls in progress, commit, unlock."""
        pq.dropped = True
        pq.arrived.set()  # wakes an idle orderly loop, which then sees ``dropped``
        if pq.fetcher is not None:
            pq.fetcher.cancel()
        if pq.tasks:
            await asyncio.wait(list(pq.tasks), timeout=30)
        self.budget.remove(list(pq.messages.values()))
        pq.messages.clear()
        with contextlib.suppress(errors.TxmqError):
            await self._commit(pq)
        if self.orderly and unlock:
            with contextlib.suppress(errors.TxmqError):
                await self.transport.unlock_queues(self.group, [pq.mq])

    # ---- offsets ------------------------------------------------------------------------------------
    async def _start_offset(self, mq: MessageQueue) -> int:
        committed = await self.transport.query_offset(self.group, mq)
        if committed is not None and committed >= 0:
            return committed
        if names.is_retry_or_dlq(mq.topic) or self.consume_from is ConsumeFrom.FIRST_OFFSET:
            return await self.transport.resolve_offset(mq, BEGINNING)
        if self.consume_from is ConsumeFrom.TIMESTAMP:
            return await self.transport.resolve_offset(mq, at_timestamp(self.consume_timestamp_ms))
        return await self.transport.resolve_offset(mq, END)

    async def _start_offset_or_unresolved(self, mq: MessageQueue) -> int:
        """The start offset now, or -1 when the broker cannot say yet (the fetcher retries)."""
        try:
            return await self._start_offset(mq)
        except errors.TxmqError as exc:
            log.debug("start offset of %s not resolved yet: %s", mq, exc)
            return -1

    async def _commit(self, pq: ProcessQueue) -> None:
        offset = pq.committable()
        if offset >= 0 and offset != pq.last_committed:
            await self.transport.update_offset(self.group, pq.mq, offset)
            pq.last_committed = offset

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.commit_interval_s)
            for pq in list(self._queues.values()):
                try:
                    await self._commit(pq)
                except errors.TxmqError as exc:
                    log.debug("committing %s failed: %s", pq.mq, exc)

    # ---- fetching -----------------------------------------------------------------------------------
    async def _fetch_loop(self, pq: ProcessQueue, sub: Subscription) -> None:
        failures = 0
        while not pq.dropped:
            try:
                if pq.next_offset < 0:
                    pq.next_offset = await self._start_offset(pq.mq)
                await self.budget.wait_for_room()
                batch = await self.transport.pull(
                    self.group, pq.mq, pq.next_offset, max_messages=self.pull_batch_size,
                    expression=sub.expression, long_poll_ms=self.long_poll_ms,
                    max_bytes=limits.pull_bytes_max,
                )  # fmt: skip
            except errors.TxmqError as exc:
                log.debug("pull from %s failed: %s", pq.mq, exc)
                await asyncio.sleep(self._backoff.delay_s(failures))
                failures += 1
                continue
            failures = 0
            if _dropped(pq):  # rebalanced away while the pull was in flight
                return
            if batch.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "offset %d of %s is gone; continuing at %d", pq.next_offset, pq.mq, batch.next_offset
                )
                pq.next_offset = batch.next_offset
            else:
                pq.next_offset = max(pq.next_offset, batch.next_offset)
            if batch.messages:
                fresh = pq.add(batch.messages)
                self.budget.add(fresh)
                if not self.orderly:
                    self._dispatch(pq, fresh)

    def _dispatch(self, pq: ProcessQueue, messages: list[MessageView]) -> None:
        size = self.consume_message_batch_max_size
        for start in range(0, len(messages), size):
            self._spawn(self._consume_concurrently(pq, messages[start : start + size]), pq)

    # ---- consuming ----------------------------------------------------------------------------------
    async def _consume_concurrently(self, pq: ProcessQueue, chunk: list[MessageView]) -> None:
        assert self._runner is not None
        while True:
            result = await self._runner.run(chunk)
            if result is ConsumeResult.SUCCESS:
                break
            failed = [m for m in chunk if not await self._send_back(m, self.retry_delay_level)]
            if not failed or pq.dropped:
                break
            await asyncio.sleep(self.suspend_interval_s)  # the broker refused the retry: consume again here
            chunk = failed
        self.budget.remove(pq.remove(chunk))

    async def _send_back(self, message: MessageView, delay_level: int) -> bool:
        try:
            await self.transport.send_back(
                self.group, message, delay_level=delay_level, max_reconsume_times=self.max_reconsume_times
            )
        except errors.TxmqError as exc:
            log.warning("send-back of %s failed: %s", message.message_id, exc)
            return False
        return True

    async def _orderly_loop(self, pq: ProcessQueue) -> None:
        assert self._runner is not None
        while not pq.dropped:
            await pq.arrived.wait()
            if _dropped(pq):
                return
            chunk = pq.head(self.consume_message_batch_max_size)
            if not chunk:
                pq.arrived.clear()
                continue
            result = await self._runner.run(chunk)
            if result is ConsumeResult.SUCCESS:
                self.budget.remove(pq.remove(chunk))
                continue
            first = chunk[0].queue_offset
            pq.attempts[first] = pq.attempts.get(first, 0) + 1
            exhausted = pq.attempts[first] > self.max_reconsume_times
            if exhausted and all([await self._send_back(m, -1) for m in chunk]):
                self.budget.remove(pq.remove(chunk))  # in the DLQ now
                continue
            await asyncio.sleep(self.suspend_interval_s)


def _dropped(pq: ProcessQueue) -> bool:
    """Read ``dropped`` through a call: another task may set it while this one awaited."""
    return pq.dropped
