"""The exactly-once sink's I/O over the SDK (no Spark here): the marker log, check-back, sending and ending.

* :class:`MarkerLog` reads and appends the sink's markers (queue 0 of ``TXMQ_SINK_<sink id>``) through
  a producer's transport; reads are incremental (a cached next offset), so answering many check-backs
  costs one empty pull each;
* :class:`SinkCheckListener` answers the broker's check-backs for the sink's producer group from that log
  (:func:`txmq.spark.sink_plan.verdict_for`). Every producer the sink opens (executor tasks, the driver's
  commit) carries it, and :func:`run_resolver` runs one alone for orphans left by a query that is down;
* :func:`send_task` (an executor task's halves) and :func:`finish_epoch` / :func:`abort_epoch` (the
  driver's commit and abort) are the shells around :mod:`txmq.spark.sink_plan`'s decisions.

Everything here is asyncio; the Spark classes in :mod:`txmq.spark.sink` run it with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from txmq.client import LocalTransactionState, TransactionListener, TransactionProducer
from txmq.client._remoting import RemotingTransport
from txmq.client._transport import PullStatus, TransactionRef, Transport
from txmq.common import errors, limits, names
from txmq.common.clock import Clock, SystemClock
from txmq.common.message import Message, MessageQueue, MessageView, SendResult
from txmq.spark.sink_plan import (
    CommitPlan,
    HalfTag,
    Marker,
    SinkOptions,
    SinkRecord,
    Verdict,
    abort_verdict,
    plan_commit,
    row_properties,
    tag_of,
    verdict_for,
)

log = logging.getLogger(__name__)

_STATE = {
    Verdict.COMMIT: LocalTransactionState.COMMIT_MESSAGE,
    Verdict.ROLLBACK: LocalTransactionState.ROLLBACK_MESSAGE,
    Verdict.UNKNOWN: LocalTransactionState.UNKNOW,
}


@dataclass(frozen=True, slots=True)
class HalfRef:
    """What the driver needs to end one half message (small and picklable)."""

    topic: str
    message_id: str
    transaction_id: str
    offset_message_id: str | None
    queue_offset: int
    broker_name: str | None = None  # the broker holding the half: the driver's decision goes there

    def ref(self) -> TransactionRef:
        return TransactionRef(
            topic=self.topic, message_id=self.message_id, transaction_id=self.transaction_id,
            queue_offset=self.queue_offset, offset_message_id=self.offset_message_id,
            broker_name=self.broker_name,
        )  # fmt: skip


@dataclass(slots=True)
class TaskResult:
    """One task attempt's commit message: its token, the halves it sent, and which try of each re-sent
    row is the one the driver ends (``{seq: try}``; every other try of those rows is rolled back)."""

    partition: int
    token: str
    halves: list[HalfRef] = field(default_factory=list)
    resent: dict[int, int] = field(default_factory=dict)


class MarkerLog:
    """The sink's durable record, read incrementally through ``transport``."""

    def __init__(self, transport: Transport, options: SinkOptions, clock: Clock | None = None) -> None:
        self._transport = transport
        self._options = options
        self._clock = clock or SystemClock()
        self._record = SinkRecord()
        self._next = 0
        self._queue: MessageQueue | None = None
        self._reading = asyncio.Lock()
        self._read_at_ms: int | None = None

    async def recent(self, max_age_ms: int = limits.spark_sink_marker_max_age_ms) -> SinkRecord:
        """The record, re-read only when older than ``max_age_ms``; concurrent callers share one read.

        A stale record is safe for check-back: markers are never removed and are read in order, so a
        record that shows batch N shows every marker before it; staleness only turns answers into UNKNOWN
        (asked again later). It matters: thousands of halves past their timeout are checked at once.
        """
        async with self._reading:
            now = self._clock.monotonic_ms()
            if self._read_at_ms is None or now - self._read_at_ms >= max_age_ms:
                await self.read()
                self._read_at_ms = now
            return self._record

    async def _marker_queue(self) -> MessageQueue | None:
        if self._queue is None:
            try:
                queues = await self._transport.route(self._options.marker_topic, for_write=False)
            except errors.TopicNotFound:
                return None
            self._queue = next((q for q in queues if q.queue_id == 0), queues[0])
        return self._queue

    async def read(self) -> SinkRecord:
        """Every marker appended so far (this sink's only; the topic is the sink's own)."""
        mq = await self._marker_queue()
        if mq is None:
            return self._record
        while True:
            batch = await self._transport.pull(
                self._options.group + "-markers", mq, self._next, max_messages=limits.pull_batch_max,
                expression="*", long_poll_ms=0, max_bytes=limits.frame_bytes_max // 2,
            )  # fmt: skip
            for message in batch.messages:
                marker = Marker.decode(message.body)
                if marker.sink_id == self._options.sink_id:
                    self._record.add(marker)
            if batch.status is PullStatus.OFFSET_ILLEGAL and batch.next_offset > self._next:
                self._next = batch.next_offset
                continue
            if batch.status is not PullStatus.FOUND or batch.next_offset <= self._next:
                return self._record
            self._next = batch.next_offset

    async def append(self, producer: TransactionProducer, marker: Marker) -> None:
        """Append ``marker`` to queue 0 (so markers stay in commit order); raises when not stored."""
        message = Message(
            topic=self._options.marker_topic, body=marker.encode(), tags="commit",
            keys=(f"{marker.sink_id}:{marker.epoch}",),
        )  # fmt: skip
        mq = await self._marker_queue()
        if mq is None:  # the first marker: the send creates the topic (auto-create), then pin queue 0
            await producer.send(message, selector=lambda queues, _m, _a: queues[0])
        else:
            await producer.send(message, queue=mq)
        self._record.add(marker)


class SinkCheckListener:
    """Answers check-backs for the sink's halves from the marker log; never runs a local transaction."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options
        self._log: MarkerLog | None = None

    def bind(self, transport: Transport) -> MarkerLog:
        self._log = MarkerLog(transport, self._options)
        return self._log

    def execute_local_transaction(self, msg: MessageView, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW  # the sink sends halves with send_half, never through here

    async def check_local_transaction(self, msg: MessageView) -> LocalTransactionState:
        tag = tag_of(msg.properties)
        if tag is None or tag.sink_id != self._options.sink_id or self._log is None:
            return LocalTransactionState.UNKNOW
        try:
            verdict = verdict_for(tag, await self._log.recent())
        except errors.TxmqError as exc:  # the broker asks again later
            log.warning("cannot read the marker log of sink %s: %s", self._options.sink_id, exc)
            return LocalTransactionState.UNKNOW
        log.debug("check-back for %s (epoch %s): %s", msg.transaction_id, tag.epoch, verdict.value)
        return _STATE[verdict]


def open_producer(options: SinkOptions, *, retries: int = 2) -> tuple[TransactionProducer, MarkerLog]:
    listener = SinkCheckListener(options)
    # the SDK awaits an async check_local_transaction; the Protocol only spells the blocking form
    producer = TransactionProducer(
        options.group, cast(TransactionListener, listener), options.endpoints, retries=retries
    )
    return producer, listener.bind(producer.transport)


# ---- executors -------------------------------------------------------------------------------------
async def send_task(
    options: SinkOptions, epoch: str, partition: int, messages: Iterable[Message]
) -> TaskResult:
    """Send one task attempt's rows as half messages; on any failure roll back what was sent, re-raise.

    The producer's own retries are off: a failed send is re-sent here as a new *try* of its row, tagged
    apart, and reported in ``TaskResult.resent``, so a first try that was stored after all (its reply was
    lost) is rolled back by check-back instead of committed next to its re-send (see :mod:`.sink_plan`).
    """
    tag = HalfTag(options.sink_id, epoch, uuid.uuid4().hex)
    result = TaskResult(partition, tag.token)
    tag_props = tag.properties(partition)
    producer, _log = open_producer(options, retries=0)
    await producer.start()
    slots = asyncio.Semaphore(limits.spark_sink_sends_in_flight)
    pending: set[asyncio.Task[None]] = set()
    failure: list[Exception] = []

    async def one(message: Message, seq: int) -> None:
        try:
            half = await _send_tries(producer, message, seq, result)
            result.halves.append(
                HalfRef(message.topic, half.message_id, half.transaction_id or "", half.offset_message_id,
                        half.queue_offset, half.queue.broker_name)
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - re-raised by the task after rolling back what was sent
            failure.append(exc)
        finally:
            slots.release()

    try:
        for seq, message in enumerate(messages):
            if failure:
                break
            await slots.acquire()
            task = asyncio.get_running_loop().create_task(
                one(_tagged(message, tag_props, seq, options.check_immunity_s), seq)
            )
            pending.add(task)
            task.add_done_callback(pending.discard)
        if pending:
            await asyncio.wait(list(pending))
        if failure:
            raise failure[0]
    except BaseException:
        if pending:  # let sends in flight finish, so that every half sent is rolled back here
            await asyncio.wait(list(pending))
        await _end_all(producer, result.halves, commit=False)
        await producer.close()
        raise
    await producer.close()
    return result


async def _send_tries(
    producer: TransactionProducer, message: Message, seq: int, result: TaskResult
) -> SendResult:
    """Send row ``seq`` as a half, re-sending a retriable failure as the next try; the try that succeeds
    is recorded in ``result.resent`` when it is not the first."""
    import dataclasses

    attempt = 0
    tried = message  # its first try, tagged by _tagged
    while True:
        try:
            half, _view = await producer.send_half(tried)
        except errors.TxmqError as exc:
            if not exc.retriable or attempt >= limits.spark_sink_send_retries:
                raise
            if len(result.resent) >= limits.spark_sink_retried_max:
                raise  # too many re-sent rows for one marker: fail the attempt, Spark retries the task
            log.debug("half of row %d failed (%s), sending try %d", seq, exc, attempt + 1)
            producer.transport.invalidate_route(message.topic)
            await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
            attempt += 1
            retry_props = {**message.properties, **row_properties(seq, attempt)}
            tried = dataclasses.replace(message, properties=retry_props)
            continue
        if attempt:
            result.resent[seq] = attempt
        return half


def _tagged(message: Message, tag_props: Mapping[str, str], seq: int, immunity_s: int | None) -> Message:
    """``message`` as the first try of row ``seq``: a half with the attempt's tag."""
    import dataclasses

    return dataclasses.replace(
        message,
        properties={**message.properties, **tag_props, **row_properties(seq, 0)},
        transactional=True,
        check_immunity_s=immunity_s if immunity_s is not None else message.check_immunity_s,
    )


# ---- the driver ------------------------------------------------------------------------------------
async def _end_all(producer: TransactionProducer, halves: Sequence[HalfRef], *, commit: bool) -> None:
    """END_TRANSACTION for each half, pipelined; a lost one is repaired by check-back from the log."""
    slots = asyncio.Semaphore(limits.spark_sink_ends_in_flight)
    transport = producer.transport
    # acknowledged where the transport offers it: the broker cancels oneway decisions still being
    # handled when the connection closes, and this producer closes right after
    end = (
        transport.end_transaction_acked
        if isinstance(transport, RemotingTransport)
        else transport.end_transaction
    )

    async def one(half: HalfRef) -> None:
        async with slots:
            try:
                await end(half.ref(), producer_group=producer.group, commit=commit, from_check=False)
            except errors.TxmqError as exc:
                log.warning("ending %s failed (%s); check-back settles it", half.transaction_id, exc)

    await asyncio.gather(*(one(h) for h in halves))


async def finish_epoch(options: SinkOptions, epoch: str, results: Sequence[TaskResult | None]) -> CommitPlan:
    """The driver's commit: record the epoch (the decision point), then commit; or roll back a replay."""
    done = [r for r in results if r is not None]
    halves = [h for r in done for h in r.halves]
    tokens = frozenset(r.token for r in done if r.halves)
    resent = {r.token: dict(r.resent) for r in done if r.halves and r.resent}
    if len(tokens) > limits.spark_sink_tokens_max:
        raise errors.InvalidArgument(
            f"{len(tokens)} task attempts in one batch; a marker names at most {limits.spark_sink_tokens_max}"
        )
    producer, marker_log = open_producer(options)
    await producer.start()
    try:
        plan = plan_commit(epoch, await marker_log.read(), len(halves))
        if plan is CommitPlan.ROLLBACK_REPLAY:
            log.info("sink %s epoch %s was already recorded: rolling back its replay", options.sink_id, epoch)
            await _end_all(producer, halves, commit=False)
        elif plan is CommitPlan.RECORD_AND_COMMIT:
            marker = Marker(options.sink_id, epoch, tokens, len(halves), int(time.time() * 1000), resent)
            await marker_log.append(producer, marker)
            await _end_all(producer, halves, commit=True)
        return plan
    finally:
        await producer.close()


async def abort_epoch(options: SinkOptions, epoch: str, results: Sequence[TaskResult | None]) -> None:
    """Roll back what the tasks sent, unless the epoch was already recorded (then finish committing)."""
    done = [r for r in results if r is not None]
    producer, marker_log = open_producer(options)
    await producer.start()
    try:
        record = await marker_log.read()
        for result in done:
            verdict = abort_verdict(HalfTag(options.sink_id, epoch, result.token), record)
            await _end_all(producer, result.halves, commit=verdict is Verdict.COMMIT)
    finally:
        await producer.close()


async def read_record(options: SinkOptions) -> SinkRecord:
    """The sink's marker log as it is now (for tools and tests)."""
    producer, marker_log = open_producer(options)
    await producer.start()
    try:
        return await marker_log.read()
    finally:
        await producer.close()


async def _announce(producer: TransactionProducer, options: SinkOptions) -> None:
    """Make the broker know this producer: a transport heartbeats only brokers it has a route to."""
    for topic in (options.marker_topic, options.topic, names.DEFAULT_TOPIC):
        if not topic:
            continue
        try:
            await producer.transport.route(topic, for_write=False)
        except errors.TopicNotFound:
            continue
        if isinstance(producer.transport, RemotingTransport):
            await producer.transport.heartbeat()
        return
    raise errors.TopicNotFound(
        f"no route to the broker of sink {options.sink_id} (name server {options.endpoints})"
    )


async def run_resolver(options: SinkOptions, stop: asyncio.Event) -> None:
    """Answer check-backs for the sink until ``stop`` is set (``txmq pipeline resolve``): settles the
    orphans of a query that is down, from its marker log."""
    producer, _log = open_producer(options)
    await producer.start()
    try:
        await _announce(producer, options)
        await stop.wait()
    finally:
        await producer.close()


__all__ = [
    "HalfRef",
    "MarkerLog",
    "SinkCheckListener",
    "TaskResult",
    "abort_epoch",
    "finish_epoch",
    "read_record",
    "run_resolver",
    "send_task",
]
