"""The source's I/O shell: short-lived broker sessions on the driver and on executors.

Executors are stateless (Spark pickles the reader, not its connections): every ``read_range`` opens
its own transport, pulls one queue's ``[start, end)`` in offset order and closes. The driver side
(offset planning) opens a session per call for the same reason: the reader object lives in a
long-running Spark worker whose calls may be minutes apart.

Only committed messages are ever returned, by construction: a transactional message lives as a half
message in ``RMQ_SYS_TRANS_HALF_TOPIC`` until its commit re-puts it into the real topic, so the queues
read here never hold a pending or rolled-back message, and offsets stay dense.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import Any, TypeVar

from txmq.client._factory import make_transport
from txmq.client._remoting import RemotingTransport
from txmq.client._remoting_convert import parse_tags
from txmq.client._transport import (
    BEGINNING,
    END,
    PullBatch,
    PullStatus,
    RawPullBatch,
    Transport,
    at_timestamp,
)
from txmq.common import errors, limits
from txmq.common.message import MessageQueue, MessageView
from txmq.spark import offsets as off
from txmq.spark import rows
from txmq.spark.options import Bound, SourceOptions

log = logging.getLogger("txmq.spark")
T = TypeVar("T")
B = TypeVar("B", PullBatch, RawPullBatch)


class DataLoss(errors.OffsetNotFound):
    """Offsets the query needs are gone (retention deleted them, or the queue was reset)."""


def data_loss(opts: SourceOptions, what: str) -> None:
    """Raise ``DataLoss`` when ``failOnDataLoss`` (the default), else log a warning and go on."""
    if opts.fail_on_data_loss:
        raise DataLoss(f"{what}; set failOnDataLoss=false to skip lost messages with a warning")
    log.warning("txmq source skipped lost messages: %s", what)


def _joined(batches: Iterator[RawPullBatch], size: int) -> Iterator[bytes]:
    """The non-empty pull bodies of ``batches``, in order, concatenated into bodies of about ``size``
    bytes (a body reaching ``size`` ends its group). The records of one queue's consecutive pulls
    chain on: a joined body reads as one pull of all of them."""
    group: list[bytes] = []
    held = 0
    for raw in batches:
        if raw.body:
            group.append(raw.body)
            held += len(raw.body)
            if held >= size:
                yield group[0] if len(group) == 1 else b"".join(group)
                group.clear()
                held = 0
    if group:
        yield group[0] if len(group) == 1 else b"".join(group)


class Session:
    """One transport with its own event loop, driven synchronously (Spark calls us from threads)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._loop = asyncio.new_event_loop()
        self.transport: Transport = make_transport(
            opts.endpoints, opts.transport, request_timeout_s=opts.request_timeout_s
        )
        self._queues: dict[off.QueueKey, MessageQueue] = {}
        self._exists: set[str] = set()  # topics seen to exist (asked once per session)

    def run(self, coro: Coroutine[Any, Any, T] | asyncio.Future[T]) -> T:
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        try:
            pending = asyncio.all_tasks(self._loop)  # a pull ahead of a reader that stopped early
            for task in pending:
                task.cancel()
            if pending:
                self.run(asyncio.gather(*pending, return_exceptions=True))
            self.run(self.transport.close())
        except errors.TxmqError as exc:
            log.debug("closing the source's transport: %s", exc)
        finally:
            self._loop.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- metadata --------------------------------------------------------------------------------
    def queues(self, *, check_exists: bool = True) -> list[off.QueueKey]:
        """Every readable queue of the options' topics, in canonical order. A topic that does not exist
        is an error (asked without creating it: a route lookup may auto-create the topic, and a read
        of an empty new topic would answer 0 rows), as a RocketMQ consumer's route lookup fails."""
        for topic in self.opts.topics:
            if check_exists and topic not in self._exists:
                if not self.run(self.transport.topic_exists(topic)):
                    raise errors.TopicNotFound(
                        f"topic {topic} does not exist at {self.opts.endpoints} ({self.opts.transport}); "
                        "create it first (txmq topic create) or check the topic and endpoints options"
                    )
                self._exists.add(topic)
            for mq in self.run(self.transport.route(topic, for_write=False)):
                self._queues[(mq.topic, mq.queue_id)] = mq
        return sorted(self._queues)

    def queue(self, key: off.QueueKey) -> MessageQueue:
        if key not in self._queues:
            self.queues(check_exists=False)  # planned by the driver, which checked the topics exist
        if key not in self._queues:
            raise errors.NotFound(f"topic {key[0]} has no readable queue {key[1]}")
        return self._queues[key]

    def low_high(self, keys: list[off.QueueKey]) -> tuple[off.Flat, off.Flat]:
        """Each queue's min offset and max offset (the next offset a new message gets)."""
        low = {k: self.run(self.transport.resolve_offset(self.queue(k), BEGINNING)) for k in keys}
        high = {k: self.run(self.transport.resolve_offset(self.queue(k), END)) for k in keys}
        return low, high

    def resolve(self, bound: Bound, *, missing: int) -> off.Flat:
        """Concrete offsets of every queue for ``bound`` (timestamps through the broker's time index)."""
        keys = self.queues()
        if bound.kind == "timestamp":
            spec = at_timestamp(bound.timestamp_ms)
            return {k: self.run(self.transport.resolve_offset(self.queue(k), spec)) for k in keys}
        low, high = self.low_high(keys)
        requested = bound.offsets if bound.kind == "offsets" else None
        if bound.kind == "earliest":
            missing = off.EARLIEST
        elif bound.kind == "latest":
            missing = off.LATEST
        return off.resolve(requested, keys, low, high, missing=missing)

    # ---- reading ---------------------------------------------------------------------------------
    def pull_range(self, rng: off.QueueRange) -> Generator[list[MessageView], None, None]:
        """Messages of ``rng`` in offset order, one pulled batch at a time (tag filter applied)."""
        with contextlib.closing(self._batches(rng, self._pull)) as batches:  # a stop drops the pull ahead
            for batch in batches:
                messages = [m for m in batch.messages if m.queue_offset < rng.end]
                if messages:
                    yield messages

    def pull_columns(self, rng: off.QueueRange) -> Iterator[rows.Columns]:
        """The rows of ``rng`` in offset order as ``rows.Columns``, one pulled batch at a time.

        Over remoting the columns are built straight from the undecoded pull bodies
        (``rows.columns_of_pulled``); over gRPC from the transport's views."""
        if not isinstance(self.transport, RemotingTransport):
            with contextlib.closing(self.pull_range(rng)) as views:
                for messages in views:
                    yield rows.columns_of_views(messages, rng.end)
            return
        tags = parse_tags(self.opts.tags)
        with contextlib.closing(self._batches(rng, self._pull_raw)) as batches:
            for raw in batches:
                if raw.body:
                    columns = rows.columns_of_pulled(raw.body, tags, rng.end)
                    if columns[0]:
                        yield columns

    def pull_arrow(self, rng: off.QueueRange, arrow_schema: Any) -> Iterator[Any]:
        """The rows of ``rng`` in offset order as ``pyarrow.RecordBatch``es of ``arrow_schema``: over
        remoting built column by column (``rows.arrow_of_pulled``) from consecutive pull bodies joined
        up to ``limits.spark_arrow_batch_bytes`` (fewer, larger batches: each batch has fixed costs in
        the conversion, in Spark's Arrow stream and in the JVM), over gRPC one per pulled batch."""
        if not isinstance(self.transport, RemotingTransport):
            for columns in self.pull_columns(rng):
                yield rows.arrow_of(columns, arrow_schema)
            return
        tags = parse_tags(self.opts.tags)
        with contextlib.closing(self._batches(rng, self._pull_raw)) as batches:
            for body in _joined(batches, limits.spark_arrow_batch_bytes):
                batch = rows.arrow_of_pulled(body, tags, rng.end, arrow_schema)
                if batch is not None:
                    yield batch

    def _batches(
        self, rng: off.QueueRange, pull: Callable[[MessageQueue, int, int], asyncio.Task[B]]
    ) -> Generator[B, None, None]:
        """The pull answers for ``rng`` in offset order (status handling and data loss checks done).

        One pull stays ahead: the request for the next batch is on the wire before a batch is handed
        to the caller, so the broker reads and encodes it while the caller converts this one."""
        opts = self.opts
        mq = self.queue((rng.topic, rng.queue_id))
        offset = rng.start
        if offset == off.EARLIEST:
            offset = self.run(self.transport.resolve_offset(mq, BEGINNING))
        where = f"{rng.topic}/{rng.queue_id}"
        ahead: asyncio.Task[B] | None = None
        try:
            while offset < rng.end:
                if ahead is None:
                    ahead = pull(mq, offset, rng.end)
                batch = self.run(ahead)
                ahead = None
                if batch.min_offset > offset:
                    data_loss(opts, f"offsets {offset}..{batch.min_offset - 1} of {where} were deleted")
                    offset = batch.min_offset
                    continue
                if batch.status is PullStatus.OFFSET_ILLEGAL or (
                    batch.status is PullStatus.NO_NEW_MESSAGE and batch.max_offset < rng.end
                ):
                    data_loss(opts, f"{where} ends at offset {batch.max_offset}, below the planned {rng.end}")
                    return
                if batch.next_offset <= offset:
                    raise errors.ProtocolError(f"the broker did not advance {where} past offset {offset}")
                offset = batch.next_offset
                if offset < rng.end:
                    ahead = pull(mq, offset, rng.end)
                    self.run(asyncio.sleep(0))  # let the request go out before the caller takes over
                yield batch
        finally:
            if ahead is not None and not self._loop.is_closed():  # the caller stopped early
                ahead.cancel()
                with contextlib.suppress(asyncio.CancelledError, errors.TxmqError):
                    self.run(ahead)

    def _pull_raw(self, mq: MessageQueue, offset: int, end: int) -> asyncio.Task[RawPullBatch]:
        opts = self.opts
        transport = self.transport
        assert isinstance(transport, RemotingTransport)
        return self._loop.create_task(
            transport.pull_raw(
                opts.group,
                mq,
                offset,
                max_messages=min(opts.pull_batch_size, end - offset),
                expression=opts.tags,
                long_poll_ms=0,
                max_bytes=limits.pull_bytes_max,
            )
        )

    def _pull(self, mq: MessageQueue, offset: int, end: int) -> asyncio.Task[PullBatch]:
        opts = self.opts
        return self._loop.create_task(
            self.transport.pull(
                opts.group,
                mq,
                offset,
                max_messages=min(opts.pull_batch_size, end - offset),
                expression=opts.tags,
                long_poll_ms=0,
                max_bytes=limits.pull_bytes_max,
            )
        )
