"""The broker: every service wired together behind one facade that both front doors (gRPC and remoting)
call. Front doors translate wire types to these calls and back; they hold no business logic.

Services (one job each): ``TopicRegistry`` (topics), ``SendService`` (the send path), ``DelayService``
(delayed delivery), ``PopService`` (receive/ack/change-invisible), ``TransactionService`` (half messages,
decisions, check-back), ``ConsumerOffsets`` (per-group offsets), ``ClientRegistry`` (who is connected).
Background work runs as step functions (``tick(now_ms)``) driven by :meth:`Broker.run_background` or, in
tests, called directly with a ``FakeClock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import heapq
import logging
import os
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from txmq.broker import delay_levels as levels_mod
from txmq.broker.clients import ClientRegistry
from txmq.broker.config import BrokerConfig
from txmq.broker.delay import DelayService
from txmq.broker.filtering import TagFilter, parse_tag_filter
from txmq.broker.offsets import ConsumerOffsets, starts_from_zero
from txmq.broker.persist import MetaFiles
from txmq.broker.pop import GroupPolicy, PopService
from txmq.broker.receipt import decode_receipt
from txmq.broker.records import index_keys, to_view
from txmq.broker.reput import to_real_topic
from txmq.broker.send import LaneSent, SendContext, SendService, decode_recall_handle
from txmq.broker.topics import TopicConfig, TopicRegistry
from txmq.broker.transaction.service import EndFinish, TransactionService
from txmq.broker.waiters import ArrivalWaiters
from txmq.common import errors, limits, msgid, names
from txmq.common import properties as props
from txmq.common.clock import Clock, SystemClock
from txmq.common.message import LeanMessage, Message, MessageQueue, MessageView, SendResult
from txmq.storage.api import ReadStatus, StoreConfig, StoredRecord
from txmq.storage.codec import RawRecord, RecordSink
from txmq.storage.dirlock import StoreLock
from txmq.storage.fs import FileSystem
from txmq.storage.store import MessageStore

log = logging.getLogger(__name__)


@functools.cache
def _memory_bytes() -> int:
    """The machine's physical memory (what RocketMQ's in-memory share is of)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


POP_LEASES_FILE = "pop_leases.json"  # the POP service's state, written by a clean stop, read once at start
RECEIVE_CHUNK = 128  # receive_chunks: messages leased per step of a streamed receive


class OffsetPolicy(enum.Enum):
    BEGINNING = "beginning"
    END = "end"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True, slots=True)
class PullResult:
    status: ReadStatus
    messages: list[MessageView]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class RawPullResult:
    """:class:`PullResult` with the messages as raw record fields (``storage.codec.RawRecord``)."""

    status: ReadStatus
    records: list[RawRecord]
    next_offset: int
    min_offset: int
    max_offset: int


_R = TypeVar("_R", PullResult, RawPullResult)


class Broker:
    def __init__(self, config: BrokerConfig, store: MessageStore, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        meta = MetaFiles(store.fs, Path(config.data_dir) / "config")
        self.meta = meta
        self.topics = TopicRegistry(
            meta, default_queues=config.default_queues, auto_create=config.auto_create_topics
        )
        self.offsets = ConsumerOffsets(meta)
        self.clients = ClientRegistry(clock)
        self.waiters = ArrivalWaiters()
        store.add_arrival_listener(self.waiters.notify)
        self.delay_levels = levels_mod.parse_delay_levels(config.delay_levels)
        self.sender = SendService(
            store,
            self.topics,
            clock,
            delay_levels=self.delay_levels,
            delay_ms_max=config.delay_ms_max,
            broker_name=config.broker_name,
        )
        self._ensure_system_topics()
        self.delays = DelayService(
            store,
            meta,
            levels=len(self.delay_levels),
            timer_queues=self.sender.timer_queue_count,
            now_ms=clock.now_ms(),
        )
        self.pop = PopService(
            store,
            self.offsets,
            revive=self._revive,
            dead_letter=self._dead_letter,
            default_policy=GroupPolicy(max_attempts=config.max_delivery_attempts),
            on_release=self.waiters.wake,
        )
        self.transactions = TransactionService(self, meta)
        self._background: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        # auto-renew leases: (next renewal at, receipt handle, group, client id, renew until, renewals
        # made), a min-heap (an item whose handle is no longer in _renew_owner is skipped); the leases
        # each client holds (client id -> {handle: group}) and each handle's client, so a client gone is
        # cleared at once
        self._renewals: list[tuple[int, str, str, str, int, int]] = []
        self._renew_owner: dict[str, str] = {}
        self._renewing: dict[str, dict[str, str]] = {}
        self.store_lock: StoreLock | None = None  # held from open to close (Broker.open takes it)

    # ---- lifecycle ----------------------------------------------------------------------------
    @classmethod
    async def open(
        cls, config: BrokerConfig, *, clock: Clock | None = None, fs: FileSystem | None = None,
        inline_flush: bool = False,
    ) -> Broker:  # fmt: skip
        """Open the store and the services. ``fs`` and ``inline_flush`` exist for the deterministic
        simulation (txmq.testing.sim): a FaultyFileSystem, and appends flushed inline instead of by
        background tasks, so one seed yields one history."""
        config.validate()
        clock = clock or SystemClock()
        # one process per store (a FileSystem given by the simulation is not on disk: nothing to lock)
        lock = StoreLock.acquire(str(Path(config.data_dir) / "store")) if fs is None else None
        try:
            return await cls._open(config, clock, fs, inline_flush, lock)
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    @classmethod
    async def _open(
        cls, config: BrokerConfig, clock: Clock, fs: FileSystem | None, inline_flush: bool,
        lock: StoreLock | None,
    ) -> Broker:  # fmt: skip
        store = MessageStore.open(
            StoreConfig(
                data_dir=str(Path(config.data_dir) / "store"),
                flush_mode=config.flush,
                flush_interval_ms=config.flush_interval_ms,
                segment_bytes=config.segment_bytes,
                prealloc_bytes=config.prealloc_bytes,
                retention_ms=config.retention_ms,
                store_host=f"{config.host}:{config.remoting_port}",
            ),
            clock=clock,
            fs=fs,
            index_keys=index_keys,
        )
        if inline_flush:
            store.inline_flush = True
        else:
            await store.start()
        try:
            broker = cls(config, store, clock)
            await broker.transactions.recover()
            broker.pop.restore(broker.meta.load_json(POP_LEASES_FILE))
            # used once: after a crash the leases of an earlier clean stop would be stale
            broker.meta.save_json(POP_LEASES_FILE, {})
        except (TypeError, KeyError, ValueError, AttributeError, IndexError) as exc:
            # a metadata file that passed its checksum but holds JSON of the wrong shape (hand-edited,
            # or written by another version): a clear error instead of a traceback on every start
            await store.close()
            raise errors.CorruptRecord(
                f"broker metadata in {Path(config.data_dir) / 'config'} is malformed ({type(exc).__name__}: "
                f"{exc}); restore the file or remove it to start with defaults"
            ) from exc
        except BaseException:
            await store.close()
            raise
        broker.store_lock = lock
        return broker

    def start_background(self) -> None:
        if self._background is None:
            self._background = asyncio.get_running_loop().create_task(self.run_background())

    async def run_background(self, period_ms: int = 100) -> None:
        """Drive every step function at its own pace until :meth:`close`."""
        last_offsets = self.clock.monotonic_ms()
        while not self._stopping.is_set():
            now = self.clock.now_ms()
            try:
                await self.tick(now)
            except errors.StoreFenced:
                log.error("the store is fenced; background services pause until restart")
            except Exception:
                log.exception("background step failed; it will run again")
            if self.clock.monotonic_ms() - last_offsets >= self.config.offset_flush_interval_ms:
                self.offsets.flush()
                last_offsets = self.clock.monotonic_ms()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), period_ms / 1000)

    async def tick(self, now_ms: int) -> None:
        """One step of every background service (tests call this with a FakeClock)."""
        await self.delays.tick(now_ms)
        self._clear_departed(now_ms)
        self._renew_leases(now_ms)
        await self.pop.tick(now_ms)
        await self.transactions.tick(now_ms)
        self.clients.expire()

    async def close(self) -> None:
        self._stopping.set()
        if self._background is not None:
            await self._background
            self._background = None
        self.offsets.flush()
        self._clear_all_renewed(self.clock.now_ms())
        try:
            self.meta.save_json(POP_LEASES_FILE, self.pop.snapshot())
        except errors.StorageError:  # best effort: without it the next start redelivers, as after a crash
            log.exception("cannot save the POP leases; they will be delivered again after the restart")
        self.delays.save()
        self.transactions.save()
        await self.store.close()
        if self.store_lock is not None:
            self.store_lock.release()
            self.store_lock = None

    def _ensure_system_topics(self) -> None:
        self.topics.ensure_system(names.HALF_TOPIC, 1)
        self.topics.ensure_system(names.OP_HALF_TOPIC, 1)
        self.topics.ensure_system(names.CHECK_MAX_TIME_TOPIC, 1)
        self.topics.ensure_system(names.SCHEDULE_TOPIC, len(self.delay_levels))
        self.topics.ensure_system(names.TIMER_TOPIC, self.sender.timer_queue_count)

    # ---- producing ----------------------------------------------------------------------------
    async def send(self, messages: Sequence[Message], ctx: SendContext) -> list[SendResult]:
        return await self.sender.send(messages, ctx)

    def send_lean(
        self, topic: str, messages: Sequence[LeanMessage], ctx: SendContext
    ) -> Coroutine[Any, Any, list[SendResult]]:
        """:meth:`send` for NORMAL/FIFO messages of one topic (the send lane, same semantics); the
        service's coroutine itself, one frame less on the hot path."""
        return self.sender.send_lean(topic, messages, ctx)

    def send_lean_batch(
        self, topic: str, messages: Sequence[LeanMessage], ctx: SendContext
    ) -> Coroutine[Any, Any, LaneSent]:
        """:meth:`send_lean` answered as columns (ids and offsets, no result object per message)."""
        return self.sender.send_lean_batch(topic, messages, ctx)

    async def end_transaction(
        self,
        *,
        topic: str,
        message_id: str,
        transaction_id: str,
        commit: bool | None,
        from_check: bool,
        client_id: str = "",
        operator: bool = False,
    ) -> None:
        await self.transactions.end(
            topic=topic,
            message_id=message_id,
            transaction_id=transaction_id,
            commit=commit,
            from_check=from_check,
            client_id=client_id,
            operator=operator,
        )

    def end_transaction_nowait(
        self,
        *,
        topic: str,
        message_id: str,
        transaction_id: str,
        commit: bool | None,
        from_check: bool,
        client_id: str = "",
        half_offset: int = -1,
    ) -> tuple[Awaitable[None], EndFinish] | Coroutine[Any, Any, None] | None:
        """:meth:`end_transaction` started from the event loop without a task (the remoting door):
        see :meth:`TransactionService.end_nowait`."""
        return self.transactions.end_nowait(
            topic=topic,
            message_id=message_id,
            transaction_id=transaction_id,
            commit=commit,
            from_check=from_check,
            client_id=client_id,
            half_offset=half_offset,
        )

    async def recall(self, topic: str, recall_handle: str) -> str:
        timer_topic, _queue_id, _queue_offset, physical = decode_recall_handle(recall_handle)
        if timer_topic not in (names.TIMER_TOPIC, names.SCHEDULE_TOPIC):
            raise errors.InvalidArgument("the recall handle does not name a delayed message")
        record = self.store.read(physical)
        decoded = props.decode(record.properties)
        if decoded.get(props.REAL_TOPIC) != topic:
            raise errors.InvalidArgument(f"the recall handle belongs to another topic than {topic}")
        deliver = int(decoded.get(props.TIMER_DELIVER_MS, "0") or 0)
        if self.delays.is_recalled(physical):  # a repeated recall succeeds again, as the Apache broker's
            return decoded.get(props.UNIQ_KEY, "")
        if deliver <= self.clock.now_ms():
            # NOT_FOUND, not MESSAGE_NOT_FOUND: clients read the latter as "nothing there, fine" (the
            # Python client returned an empty id as if the recall had worked)
            raise errors.NotFound("the delayed message was already delivered; it cannot be recalled")
        self.delays.recall(physical)
        return decoded.get(props.UNIQ_KEY, "")

    # ---- routes -------------------------------------------------------------------------------
    def route(self, topic: str) -> TopicConfig:
        """The topic's configuration for a route query (auto-created if allowed)."""
        return self.topics.resolve(topic, for_write=False)

    def queues_of(self, topic: str) -> list[MessageQueue]:
        config = self.route(topic)
        return [MessageQueue(topic, q, self.config.broker_name) for q in range(config.queues)]

    # ---- POP consumption ----------------------------------------------------------------------
    def set_group_policy(
        self, group: str, *, max_attempts: int | None = None, fifo: bool | None = None
    ) -> None:
        current = self.pop.policy(group)
        self.pop.set_policy(
            group,
            GroupPolicy(
                max_attempts=current.max_attempts if max_attempts is None else max(1, max_attempts),
                fifo=current.fifo if fifo is None else fifo,
            ),
        )

    async def receive(
        self,
        *,
        group: str,
        topic: str,
        expression: str | None,
        batch_size: int,
        invisible_ms: int,
        long_poll_ms: int,
        queue_id: int | None = None,
    ) -> list[MessageView]:
        tag_filter, config = self._check_receive(
            group, topic, expression, batch_size, invisible_ms, long_poll_ms
        )
        return await self._receive(
            group, topic, config, tag_filter, batch_size, invisible_ms, long_poll_ms, queue_id
        )

    async def receive_chunks(
        self,
        *,
        group: str,
        topic: str,
        expression: str | None,
        batch_size: int,
        invisible_ms: int,
        long_poll_ms: int,
        queue_id: int | None = None,
        chunk: int = RECEIVE_CHUNK,
    ) -> AsyncGenerator[list[MessageView], None]:
        """:meth:`receive`, handed out in lists of at most ``chunk`` messages (never empty), so a door
        can write the first messages of a large batch while the broker leases the next ones instead of
        holding the event loop for the whole batch. The first list waits like ``receive`` (and invalid
        arguments raise before it); the later ones take what is visible right away, up to
        ``batch_size`` in all, and the iteration ends at the first short list."""
        tag_filter, config = self._check_receive(
            group, topic, expression, batch_size, invisible_ms, long_poll_ms
        )
        remaining, wait_ms = batch_size, long_poll_ms
        while remaining > 0:
            want = min(chunk, remaining)
            messages = await self._receive(
                group, topic, config, tag_filter, want, invisible_ms, wait_ms, queue_id
            )
            if not messages:
                return
            yield messages
            if len(messages) < want:
                return
            remaining -= len(messages)
            wait_ms = 0

    def _check_receive(
        self,
        group: str,
        topic: str,
        expression: str | None,
        batch_size: int,
        invisible_ms: int,
        long_poll_ms: int,
    ) -> tuple[TagFilter, TopicConfig]:
        names.validate_group(group)
        if not 1 <= batch_size <= limits.receive_batch_max:
            raise errors.InvalidArgument(f"batch size must be 1..{limits.receive_batch_max}")
        low, high = self.config.receive_invisible_ms_min, self.config.invisible_ms_max
        if not low <= invisible_ms <= high:  # the Apache proxy's bounds (GrpcValidator)
            raise errors.InvalidInvisibleTime(
                f"invisible duration {invisible_ms} ms is too {'small' if invisible_ms < low else 'large'}: "
                f"a receive takes {low} ms..{high} ms (broker settings receive_invisible_min, invisible_max)"
            )
        if not 0 <= long_poll_ms <= limits.long_polling_ms_max:
            raise errors.InvalidPollingTime(f"long polling time must be 0..{limits.long_polling_ms_max} ms")
        return parse_tag_filter(expression), self.topics.resolve(topic, for_write=False)

    async def _receive(
        self,
        group: str,
        topic: str,
        config: TopicConfig,
        tag_filter: TagFilter,
        batch_size: int,
        invisible_ms: int,
        long_poll_ms: int,
        queue_id: int | None,
    ) -> list[MessageView]:
        deadline = self.clock.monotonic_ms() + long_poll_ms
        watched = {topic, names.retry_topic(group)}
        while True:
            version = self.waiters.version
            # recomputed each round: the retry topic may appear while we wait (a revive created it)
            queues = self._pop_queues(group, config, queue_id)
            messages = await self.pop.receive(
                group, queues, tag_filter, batch_size, invisible_ms, self.clock.now_ms()
            )
            remaining = deadline - self.clock.monotonic_ms()
            if messages or remaining <= 0:
                return messages
            wake_in = remaining
            next_expiry = self.pop.next_deadline_ms()
            if next_expiry is not None:
                wake_in = min(wake_in, max(1, next_expiry - self.clock.now_ms()))
            await self.waiters.wait(watched, version, wake_in)

    def _pop_queues(self, group: str, config: TopicConfig, queue_id: int | None) -> list[tuple[str, int]]:
        if queue_id is not None and queue_id >= 0:
            if queue_id >= config.queues:
                raise errors.InvalidArgument(f"topic {config.name} has no queue {queue_id}")
            queues = [(config.name, queue_id)]
        else:
            queues = [(config.name, q) for q in range(config.queues)]
            shift = self.waiters.version % max(1, len(queues))
            queues = queues[shift:] + queues[:shift]
        retry = names.retry_topic(group)
        if self.topics.get(retry) is not None and (queue_id is None or queue_id < 0 or queue_id == 0):
            queues.append((retry, 0))
        return queues

    def ack(self, *, group: str, receipt_handle: str) -> None:
        """Ack the message leased under ``receipt_handle``. A handle still inside its invisible time whose
        lease is gone (acked already, or replaced by change_invisible) is answered OK and changes
        nothing, as Apache's broker answers a repeated ack: a client retrying an ack whose answer was
        lost must not get an error. An expired handle is refused, as the Apache proxy refuses it."""
        try:
            self.pop.ack(group, receipt_handle)
            if self._renew_owner:
                self._unrenew(receipt_handle)
        except errors.InvalidReceiptHandle:
            if decode_receipt(receipt_handle).deadline_ms <= self.clock.now_ms():
                raise errors.InvalidReceiptHandle(
                    "the receipt handle has expired: its invisible time passed, so the message may "
                    "have been delivered again; ack the handle of that delivery"
                ) from None

    def renew_for(self, group: str, client_id: str, views: Sequence[MessageView]) -> None:
        """Renew the leases of ``views`` (an auto-renew receive) while ``client_id`` is live, as the
        Apache proxy's ReceiptHandleProcessor does: each is renewed ``limits.auto_renew_ahead_ms``
        before it ends, under the same receipt handle, for ``limits.auto_renew_steps_ms`` (1 m, 3 m,
        5 m, 10 m, 30 m, then 1 h each); an ack or a change of invisible time ends it. The first renewal
        due ``limits.auto_renew_max_ms`` (3 h) after the receive or later is not made: the message is
        nacked instead (``_renew_leases``). A client the broker does not know is not renewed (its
        leases end as leased); a client that goes away has its leases cut to
        ``limits.auto_renew_clear_ms`` (``_clear_departed``)."""
        if self.clients.get(client_id) is None:
            return
        now = self.clock.now_ms()
        until = now + limits.auto_renew_max_ms
        held = self._renewing.setdefault(client_id, {})
        for view in views:
            handle = view.receipt_handle
            deadline = self.pop.deadline_of(group, handle) if handle else None
            if handle and deadline is not None:
                renew_at = deadline - limits.auto_renew_ahead_ms
                heapq.heappush(self._renewals, (renew_at, handle, group, client_id, until, 0))
                held[handle] = group
                self._renew_owner[handle] = client_id
        if not held:
            del self._renewing[client_id]

    def _unrenew(self, handle: str) -> None:
        client_id = self._renew_owner.pop(handle, None)
        if client_id is not None:
            held = self._renewing.get(client_id)
            if held is not None:
                held.pop(handle, None)
                if not held:
                    del self._renewing[client_id]

    def _renew_leases(self, now_ms: int) -> None:
        renewals, ahead, steps = self._renewals, limits.auto_renew_ahead_ms, limits.auto_renew_steps_ms
        owner = self._renew_owner
        while renewals and renewals[0][0] <= now_ms:
            _, handle, group, client_id, until, renewed = heapq.heappop(renewals)
            if owner.get(handle) != client_id:
                continue  # acked, changed, or its client was gone and the lease cut
            if now_ms >= until:
                self._unrenew(handle)
                self._stop_renewing(group, handle, now_ms)
                continue
            lease = min(steps[min(renewed, len(steps) - 1)], self.config.invisible_ms_max)
            deadline = self.pop.extend(group, handle, lease, now_ms)
            if deadline is None:
                self._unrenew(handle)  # the lease ended otherwise (expired, moved to the DLQ)
            else:  # next time at least one ms on (a lease shorter than the margin)
                next_at = max(deadline - ahead, now_ms + 1)
                heapq.heappush(renewals, (next_at, handle, group, client_id, until, renewed + 1))

    def _stop_renewing(self, group: str, handle: str, now_ms: int) -> None:
        """A lease renewed for ``limits.auto_renew_max_ms``: nack it as the Apache proxy does (its
        STOP_RENEW event), changing its invisible time to the group's retry delay for the delivery
        attempt it holds (``BrokerConfig.retry_delay_ms``, the delay a consumer's own nack takes).
        The change gives the lease a new handle that nobody holds: when it ends the message is
        delivered again as a retry (or dead-lettered after the group's last attempt), and the
        consumer's handle no longer acks it. A lease gone meanwhile (acked, expired) is left alone."""
        try:
            _, entry = self.pop.lookup(group, handle)
            delay = self.config.retry_delay_ms(entry.attempt)
            self.pop.change_invisible(group, handle, delay, now_ms)
        except errors.InvalidReceiptHandle:
            return
        log.info(
            "auto-renewed for %d ms without an ack: %s nacked, delivered again in %d ms",
            limits.auto_renew_max_ms, decode_receipt(handle).topic, delay,
        )  # fmt: skip

    def _clear_departed(self, now_ms: int) -> None:
        """Cut the auto-renewed leases of every client gone to ``limits.auto_renew_clear_ms`` from now,
        as the Apache proxy's DefaultReceiptHandleManager.clearGroup does when a client unregisters
        (NotifyClientTermination, heartbeats silent past the expiry) or its channel is found gone: a
        killed PushConsumer's messages go to another consumer in seconds, not when the lease ends."""
        if not self._renewing:
            return
        grace = limits.client_detached_grace_ms
        for client_id in list(self._renewing):
            reason = self.clients.departed(client_id, grace)
            if reason is not None:
                self._cut_renewed(client_id, reason, now_ms)

    def _clear_all_renewed(self, now_ms: int) -> None:
        """On a clean stop, cut every auto-renewed lease to ``limits.auto_renew_clear_ms`` before the
        leases are saved, as the Apache proxy's shutdown does (clearAllHandle): renewals live in memory,
        so after the restart nobody would renew a lease of up to an hour, and a consumer that did not
        come back would hold its message that long. A consumer still working on one gets it again
        (at least once), as behind a restarted proxy."""
        for client_id in list(self._renewing):
            self._cut_renewed(client_id, "the broker stops", now_ms)

    def _cut_renewed(self, client_id: str, reason: str, now_ms: int) -> None:
        cut = limits.auto_renew_clear_ms
        held = self._renewing.pop(client_id)
        topics: set[str] = set()
        cut_count = 0
        for handle, group in held.items():
            self._renew_owner.pop(handle, None)
            deadline = self.pop.deadline_of(group, handle)
            if deadline is not None and deadline > now_ms + cut:
                self.pop.extend(group, handle, cut, now_ms)
                topics.add(decode_receipt(handle).topic)
                cut_count += 1
        log.info(
            "auto-renew of client %s ends (%s): %d of its messages become visible in %d ms",
            client_id, reason, cut_count, cut,
        )  # fmt: skip
        for topic in topics:  # long polls recompute when to wake: the next deadline moved closer
            self.waiters.wake(topic)

    def change_invisible(self, *, group: str, receipt_handle: str, invisible_ms: int) -> str:
        if not 0 <= invisible_ms <= self.config.invisible_ms_max:
            raise errors.InvalidInvisibleTime(
                f"invisible duration {invisible_ms} ms is out of range 0..{self.config.invisible_ms_max} ms"
            )
        new_handle = self.pop.change_invisible(group, receipt_handle, invisible_ms, self.clock.now_ms())
        if self._renew_owner:
            self._unrenew(receipt_handle)  # the client chose a time: renewals stop (as the proxy's)
        return new_handle

    async def forward_to_dlq(self, *, group: str, receipt_handle: str) -> None:
        await self.pop.forward_to_dlq(group, receipt_handle)
        if self._renew_owner:
            self._unrenew(receipt_handle)

    def query_assignment(self, topic: str, group: str) -> list[MessageQueue]:
        config = self.route(topic)
        if self.pop.policy(group).fifo:
            return [MessageQueue(topic, q, self.config.broker_name) for q in range(config.queues)]
        return [MessageQueue(topic, -1, self.config.broker_name)]

    async def _revive(self, group: str, record: StoredRecord, decoded: dict[str, str], attempt: int) -> None:
        retry = names.retry_topic(group)
        self.topics.resolve(retry, for_write=True)
        extra = {
            props.RECONSUME_TIME: str(attempt),
            props.RETRY_TOPIC: decoded.get(props.RETRY_TOPIC) or record.topic,
            props.ORIGIN_MESSAGE_ID: decoded.get(props.ORIGIN_MESSAGE_ID) or decoded.get(props.UNIQ_KEY, ""),
        }
        request = to_real_topic(
            record, {**decoded, props.REAL_TOPIC: retry, props.REAL_QUEUE_ID: "0"}, extra=extra
        )
        await self.store.put(request)

    async def _dead_letter(
        self, group: str, record: StoredRecord, decoded: dict[str, str], attempt: int
    ) -> None:
        dlq = names.dlq_topic(group)
        self.topics.resolve(dlq, for_write=True)
        origin_topic = decoded.get(props.RETRY_TOPIC) or record.topic
        extra = {
            props.RECONSUME_TIME: str(attempt),
            props.DLQ_ORIGIN_TOPIC: origin_topic,
            props.DLQ_ORIGIN_MESSAGE_ID: decoded.get(props.UNIQ_KEY, ""),
        }
        decoded = {k: v for k, v in decoded.items() if k != props.RETRY_TOPIC}
        request = to_real_topic(
            record, {**decoded, props.REAL_TOPIC: dlq, props.REAL_QUEUE_ID: "0"}, extra=extra
        )
        await self.store.put(request)
        log.info(
            "message %s of group %s moved to %s after %d attempts",
            decoded.get(props.UNIQ_KEY),
            group,
            dlq,
            attempt,
        )

    # ---- offset-based pull --------------------------------------------------------------------
    async def pull(
        self,
        *,
        group: str | None,
        topic: str,
        queue_id: int,
        offset: int,
        batch_size: int,
        expression: str | None = None,
        long_poll_ms: int = 0,
        max_bytes: int = limits.pull_bytes_max,
    ) -> PullResult:
        def once(offset: int, tag_filter: TagFilter) -> tuple[PullResult, bool]:
            result = self._pull_once(topic, queue_id, offset, batch_size, tag_filter, max_bytes)
            return result, bool(result.messages)

        return await self._pull_loop(once, topic, queue_id, offset, batch_size, expression, long_poll_ms)

    async def pull_into(
        self,
        sink: RecordSink,
        *,
        group: str | None,
        topic: str,
        queue_id: int,
        offset: int,
        batch_size: int,
        expression: str | None = None,
        long_poll_ms: int = 0,
        max_bytes: int = limits.pull_bytes_max,
    ) -> RawPullResult:
        """:meth:`pull` with the messages handed to ``sink`` (``storage.codec.RecordSink``) as raw
        record fields instead of returned: the same queue positions, filter, statuses, offsets and long
        polling; the result's ``records`` is empty and ``sink.count`` says how many messages the pull
        found. Without a tag filter the log's records go straight to the sink
        (``MessageStore.read_queue_into``: no RawRecord tuples); with one, the raw records the filter
        keeps (``_pull_once_raw``: units passed over by their tags code before the log is read) go to
        ``sink.take_fields``."""

        def once(offset: int, tag_filter: TagFilter) -> tuple[RawPullResult, bool]:
            if tag_filter.match_all:
                read = self.store.read_queue_into(topic, queue_id, offset, batch_size, max_bytes, sink)
                found = sink.count > 0
                status = read.status
                if status is ReadStatus.FOUND and not found:
                    status = ReadStatus.NO_NEW_MESSAGE
                return RawPullResult(status, [], read.next_offset, read.min_offset, read.max_offset), found
            result = self._pull_once_raw(topic, queue_id, offset, batch_size, tag_filter, max_bytes)
            sink.clear()
            for record in result.records:
                sink.take_fields(record)
            kept = RawPullResult(result.status, [], result.next_offset, result.min_offset, result.max_offset)
            return kept, bool(result.records)

        return await self._pull_loop(once, topic, queue_id, offset, batch_size, expression, long_poll_ms)

    async def _pull_loop(
        self, once: Callable[[int, TagFilter], tuple[_R, bool]], topic: str, queue_id: int, offset: int,
        batch_size: int, expression: str | None, long_poll_ms: int,
    ) -> _R:  # fmt: skip
        # a negative offset is answered as one below the queue's minimum (OFFSET_TOO_SMALL with the
        # minimum as next offset; remoting PULL_OFFSET_MOVED), as Apache's broker does, not refused
        if not 1 <= batch_size <= limits.pull_batch_max:
            raise errors.InvalidArgument(f"batch size must be 1..{limits.pull_batch_max}")
        config = self.topics.resolve(topic, for_write=False)
        if not 0 <= queue_id < config.queues:
            raise errors.InvalidArgument(f"topic {topic} has no queue {queue_id}")
        tag_filter = parse_tag_filter(expression)
        deadline = self.clock.monotonic_ms() + max(0, min(long_poll_ms, limits.long_polling_ms_max))
        while True:
            version = self.waiters.version
            result, found = once(offset, tag_filter)
            remaining = deadline - self.clock.monotonic_ms()
            if found or result.status is not ReadStatus.NO_NEW_MESSAGE or remaining <= 0:
                return result
            if result.next_offset > offset:  # everything read was filtered out: continue from there
                offset = result.next_offset
                continue
            await self.waiters.wait({topic}, version, remaining)

    def _pull_once(
        self, topic: str, queue_id: int, offset: int, batch_size: int, tag_filter: TagFilter, max_bytes: int
    ) -> PullResult:
        read = self.store.read_queue(topic, queue_id, offset, batch_size, max_bytes)
        messages: list[MessageView] = []
        for record in read.records:
            decoded = props.decode(record.properties)
            if tag_filter.matches_hash(record.tags_code) and tag_filter.matches(decoded.get(props.TAGS)):
                messages.append(to_view(record, decoded=decoded, raw_properties=record.properties))
        status = read.status
        if status is ReadStatus.FOUND and not messages:
            status = ReadStatus.NO_NEW_MESSAGE
        return PullResult(status, messages, read.next_offset, read.min_offset, read.max_offset)

    def _pull_once_raw(
        self, topic: str, queue_id: int, offset: int, batch_size: int, tag_filter: TagFilter, max_bytes: int
    ) -> RawPullResult:
        if tag_filter.match_all:
            read = self.store.read_queue_raw(topic, queue_id, offset, batch_size, max_bytes)
            records = read.records
        else:
            hashes = tag_filter.hashes
            read = self.store.read_queue_raw(topic, queue_id, offset, batch_size, max_bytes, hashes)
            # the tags code matched; hashes collide, so the tag itself decides (as in _pull_once)
            records = [r for r in read.records if tag_filter.matches(props.decode(r[12]).get(props.TAGS))]
        status = read.status
        if status is ReadStatus.FOUND and not records:
            status = ReadStatus.NO_NEW_MESSAGE
        return RawPullResult(status, records, read.next_offset, read.min_offset, read.max_offset)

    def get_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.offsets.get(group, topic, queue_id)

    def new_group_offset(self, topic: str, queue_id: int) -> int | None:
        """Where a group with no offset for this queue starts when its client lets the broker say
        (QUERY_CONSUMER_OFFSET without ``setZeroIfNotFound=false``): 0 for a young queue, as RocketMQ
        answers (``offsets.starts_from_zero``); None leaves it to the client's consume-from setting."""
        store = self.store
        low = store.min_offset(topic, queue_id)
        first = store.queue_units(topic, queue_id, 0, 1) if low == 0 else []
        young = starts_from_zero(
            low,
            first[0].physical_offset if first else None,
            store.max_physical_offset,
            _memory_bytes(),
            limits.new_group_from_zero_memory_ratio,
        )
        return 0 if young else None

    def update_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        names.validate_group(group)
        if offset < 0:
            raise errors.InvalidOffset("the offset must not be negative")
        self.offsets.set(group, topic, queue_id, offset)

    def query_offset(self, topic: str, queue_id: int, policy: OffsetPolicy, timestamp_ms: int = 0) -> int:
        config = self.topics.resolve(topic, for_write=False)
        if not 0 <= queue_id < config.queues:
            raise errors.InvalidArgument(f"topic {topic} has no queue {queue_id}")
        if policy is OffsetPolicy.BEGINNING:
            return self.store.min_offset(topic, queue_id)
        if policy is OffsetPolicy.END:
            return self.store.max_offset(topic, queue_id)
        return self.store.offset_by_time(topic, queue_id, timestamp_ms)

    def reset_group_offset(
        self, group: str, topic: str, offset_policy: OffsetPolicy, timestamp_ms: int = 0
    ) -> dict[int, int]:
        # an operator's command: a mistyped topic is an error, never a topic auto-created to reset
        if self.topics.get(topic) is None:
            raise errors.TopicNotFound(f"topic {topic} does not exist")
        config = self.topics.resolve(topic, for_write=False)
        result: dict[int, int] = {}
        for queue_id in range(config.queues):
            offset = self.query_offset(topic, queue_id, offset_policy, timestamp_ms)
            self.pop.reset(group, topic, queue_id, offset)
            result[queue_id] = offset
        self.offsets.flush()
        return result

    # ---- queries ------------------------------------------------------------------------------
    def query_by_key(self, key: str, *, topic: str | None = None, max_count: int = 64) -> list[MessageView]:
        views = [to_view(r) for r in self.store.query_by_key(key, max_count)]
        return [v for v in views if topic is None or v.topic == topic]

    def view_by_id(self, message_id: str) -> MessageView:
        parsed = msgid.parse_offset_message_id(message_id)
        if parsed is not None:
            try:
                return to_view(self.store.read(parsed[2]))
            except errors.TxmqError:
                pass
        for view in self.query_by_key(message_id, max_count=16):
            if view.message_id == message_id:
                return view
        raise errors.MessageNotFound(f"no message with id {message_id}")
