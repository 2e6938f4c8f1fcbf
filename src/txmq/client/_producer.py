"""``Producer``: sync-style, async and oneway sends, batches, ordered sends, delays, retries, back-pressure.

Every send first takes room in a bounded in-flight window (``max_in_flight`` requests and
``max_in_flight_bytes``); when the broker falls behind, senders wait up to ``send_timeout_s`` and then get
``SendTimeout``: memory never grows without bound. A send failing with a retriable error
(``TxmqError.retriable``: connection lost, broker busy, timeout) is retried up to ``retries`` times with
exponential back-off and jitter, on the next queue unless the queue was chosen for ordering (a selector or
a message group). A retried send whose first attempt did reach the broker may be stored twice: delivery
is at least once, so consumers should be idempotent (see ``Deduplicator``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

from txmq.client._backoff import Backoff, ClientStatus
from txmq.client._factory import TransportName, make_transport
from txmq.client._remoting import RemotingTransport
from txmq.client._selectors import MessageQueueSelector, entry_bytes
from txmq.client._single import PLAIN_TOTAL, send_result
from txmq.client._transport import Feature, Transport
from txmq.client._window import InFlightWindow
from txmq.common import errors, limits, names
from txmq.common.message import Message, MessageQueue, SendResult

try:  # mypyc reads the decorator at compile time; mypy_extensions is not a run-time dependency
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover - pure Python without mypy installed: a decorator doing nothing

    def mypyc_attr(*_args: object, **_kwargs: object) -> Callable[[type], type]:  # type: ignore[misc]
        return lambda cls: cls


log = logging.getLogger(__name__)

DELAY_LEVEL_MAX: Final = 18
DEFAULT_GROUP: Final = "DEFAULT_PRODUCER"
MAX_IN_FLIGHT: Final = 1024  # the in-flight window's defaults (TransactionProducer's too)
MAX_IN_FLIGHT_BYTES: Final = 64 * limits.MiB

SendCallback = Callable[[SendResult | None, BaseException | None], None]


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled, and still a class users may subclass
class Producer:
    """Sends messages to topics.

    ``endpoints`` is a name server for the remoting transport (``"127.0.0.1:9876"``, the default) or a
    gRPC endpoint with ``transport="grpc"`` (``"127.0.0.1:8081"``)::

        async with Producer("127.0.0.1:9876") as producer:
            result = await producer.send(Message("orders", b"{...}", tags="created"))
            print(result.message_id, result.queue.queue_id, result.queue_offset)
    """

    def __init__(
        self,
        endpoints: str = "127.0.0.1:9876",
        *,
        group: str = DEFAULT_GROUP,
        transport: TransportName | Transport = "remoting",
        send_timeout_s: float = 3.0,
        retries: int = 2,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_in_flight_bytes: int = MAX_IN_FLIGHT_BYTES,
        backoff: Backoff | None = None,
    ) -> None:
        names.validate_group(group)
        if retries < 0 or send_timeout_s <= 0:
            raise errors.InvalidArgument("retries must be >= 0 and send_timeout_s > 0")
        self.group = group
        self.send_timeout_s = send_timeout_s
        self.retries = retries
        self.transport = make_transport(endpoints, transport, request_timeout_s=send_timeout_s)
        self._owns_transport = isinstance(transport, str)
        self._queue_selection = self.transport.supports(Feature.QUEUE_SELECTION)
        self._remoting = self.transport if isinstance(self.transport, RemotingTransport) else None
        self._backoff = backoff or Backoff(initial_s=0.02, max_s=1.0)
        self._max_in_flight = (max_in_flight, max_in_flight_bytes)
        self._window: InFlightWindow | None = None
        self._round_robin = itertools.count()
        self._pending: set[asyncio.Future[SendResult]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.status = ClientStatus.CREATED

    async def start(self) -> None:
        """Connect and register the producer group (also done by ``async with``)."""
        if self.status is ClientStatus.RUNNING:
            return
        self._window = InFlightWindow(*self._max_in_flight)
        self._loop = asyncio.get_running_loop()
        await self.transport.start()
        await self.transport.register_producer(self.group)
        self.status = ClientStatus.RUNNING

    async def close(self) -> None:
        """Wait for sends in flight, then unregister and disconnect."""
        if self.status is not ClientStatus.RUNNING:
            return
        self.status = ClientStatus.CLOSING
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=self.send_timeout_s * (self.retries + 1))
        await self.transport.unregister_producer(self.group)
        if self._owns_transport:
            await self.transport.close()
        self.status = ClientStatus.CLOSED

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _require_running(self) -> InFlightWindow:
        if self.status is not ClientStatus.RUNNING or self._window is None:
            raise errors.ClientClosed("the producer is not running: call start() or use 'async with'")
        return self._window

    # ---- validation and queue choice ------------------------------------------------------------
    def _validate(self, message: Message, *, transactional_ok: bool = False) -> None:
        message.validate()
        if message.transactional and not transactional_ok:
            raise errors.InvalidArgument("transactional messages go through TransactionProducer")
        if message.delay_level is not None and not 1 <= message.delay_level <= DELAY_LEVEL_MAX:
            raise errors.InvalidDeliveryTime(
                f"delay level {message.delay_level} is not in 1..{DELAY_LEVEL_MAX}"
            )
        if message.delivery_timestamp_ms is not None and not self.transport.supports(
            Feature.DELIVERY_TIMESTAMP
        ):
            raise errors.Unsupported(
                f"the {self.transport.name} transport cannot carry delivery timestamps; use delay_level"
            )

    async def _pick(
        self, message: Message, selector: MessageQueueSelector | None, arg: Any, attempt: int
    ) -> tuple[MessageQueue | None, bool]:
        """(queue or None for "the broker decides", whether the choice is pinned for ordering)."""
        if selector is not None:
            if not self.transport.supports(Feature.QUEUE_SELECTION):
                raise errors.Unsupported(
                    f"the {self.transport.name} server places messages itself; order by message_group"
                )
            queues = await self.transport.route(message.topic, for_write=True)
            chosen = selector(queues, message, arg)
            if not isinstance(chosen, MessageQueue):
                raise errors.InvalidArgument(f"the selector returned {chosen!r}, not a MessageQueue")
            return chosen, True
        if message.message_group is not None:
            return None, True  # the broker hashes the group to a queue, the same on every transport
        known = self.transport.cached_write_queues(message.topic)
        if not known:
            known = await self.transport.route(message.topic, for_write=True)
        return known[(next(self._round_robin) + attempt) % len(known)], False

    # ---- sends ----------------------------------------------------------------------------------
    async def _send_with_retries(
        self,
        messages: Sequence[Message],
        selector: MessageQueueSelector | None,
        arg: Any,
        queue: MessageQueue | None,
        timeout_s: float,
        attempt: int = 0,
    ) -> list[SendResult]:
        if queue is not None and not self.transport.supports(Feature.QUEUE_SELECTION):
            raise errors.Unsupported(f"the {self.transport.name} server chooses the queue of a send")
        while True:
            mq, _pinned = (
                (queue, True) if queue is not None else await self._pick(messages[0], selector, arg, attempt)
            )
            try:
                return await self.transport.send(mq, messages, producer_group=self.group, timeout_s=timeout_s)
            except errors.TxmqError as exc:
                await self._before_retry(exc, attempt, mq, messages[0].topic)
                attempt += 1

    async def _before_retry(
        self, exc: errors.TxmqError, attempt: int, mq: MessageQueue | None, topic: str
    ) -> None:
        """Re-raise ``exc`` unless attempt ``attempt`` (0: the first) may be retried; else pause."""
        if not self._may_retry(exc, attempt):
            raise exc
        log.debug("send to %s failed (%s), retry %d", mq, exc, attempt + 1)
        self.transport.invalidate_route(topic)
        await asyncio.sleep(self._backoff.delay_s(attempt))

    async def send(
        self,
        message: Message,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        queue: MessageQueue | None = None,
        timeout_s: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer: the message id, the queue and the offset.

        Ordered: ``send(msg, selector=select_by_hash, arg=order_id)`` puts every message of one order
        on one queue; or set ``message_group`` on the message. ``queue`` pins an explicit queue::

            msg = Message("orders", b"paid", tags="paid")
            result = await producer.send(msg, selector=select_by_hash, arg=42)
        """
        window = self._require_running()
        self._validate(message)
        nbytes = entry_bytes(message)
        timeout = timeout_s or self.send_timeout_s
        if not window.try_acquire(nbytes):
            await window.acquire(nbytes, timeout)
        try:
            remoting = self._remoting
            if remoting is not None and selector is None:
                # The common case over remoting (a pinned queue, or a known route and no ordering): the
                # first attempt is started here and its answer awaited in this coroutine, with no
                # transport or channel coroutine per message; retries go the general way.
                mq = queue
                if mq is None and message.message_group is None:
                    known = remoting.cached_write_queues(message.topic)
                    if known:
                        mq = known[next(self._round_robin) % len(known)]
                if mq is not None:
                    try:
                        started = remoting.start_single(mq, message, self.group, timeout)
                        if started is not None:
                            return send_result(mq, started[1], await started[0])
                    except errors.TxmqError as exc:
                        await self._before_retry(exc, 0, mq, message.topic)
                        return (await self._send_with_retries([message], None, None, queue, timeout, 1))[0]
            if queue is None or not self._queue_selection:
                return (await self._send_with_retries([message], selector, arg, queue, timeout))[0]
            # a pinned queue: the first attempt without the retry loop's coroutine
            try:
                results = await self.transport.send(
                    queue, [message], producer_group=self.group, timeout_s=timeout
                )
            except errors.TxmqError as exc:
                await self._before_retry(exc, 0, queue, message.topic)
                results = await self._send_with_retries([message], None, None, queue, timeout, attempt=1)
            return results[0]
        finally:
            window.release(nbytes)

    async def send_async(
        self,
        message: Message,
        callback: SendCallback | None = None,
        *,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> asyncio.Future[SendResult]:
        """Hand a message over and return at once with a future of its ``SendResult``.

        Awaiting ``send_async`` waits only for room in the in-flight window (``SendTimeout`` if none);
        the returned future completes when the broker answers. ``callback(result, error)`` runs then::

            futures = [await producer.send_async(Message("logs", line)) for line in lines]
            results = await asyncio.gather(*futures)
        """
        window = self._require_running()
        self._validate(message)
        nbytes = entry_bytes(message)
        if not window.try_acquire(nbytes):
            await window.acquire(nbytes, self.send_timeout_s)
        loop = self._loop or asyncio.get_running_loop()  # cached: 3.11's getpid() per call is a syscall
        future: asyncio.Future[SendResult] = loop.create_future()
        self._pending.add(future)

        def finish(result: SendResult | None, error: BaseException | None) -> None:
            window.release(nbytes)
            self._pending.discard(future)
            if not future.done():  # the caller may have cancelled it
                if error is None:
                    future.set_result(result)  # type: ignore[arg-type]
                else:
                    future.set_exception(error)
            if callback is not None:
                try:
                    callback(result, error)
                except Exception:
                    log.exception("send callback raised")

        def task_done(t: asyncio.Task[list[SendResult]]) -> None:
            error = t.exception() if not t.cancelled() else asyncio.CancelledError()
            finish(None if error else t.result()[0], error)

        def first_done(result: SendResult | None, error: BaseException | None) -> None:
            if not isinstance(error, errors.TxmqError) or not self._may_retry(error, 0):
                finish(result, error)
                return
            retry = loop.create_task(self._retry_async(message, error, mq))
            retry.add_done_callback(task_done)

        # The common case (the route is known, the connection open, no ordering): the first attempt
        # starts here and its answer completes the future from the read callback, with no task per
        # message; a retriable failure goes on in a task, as every send does otherwise.
        mq: MessageQueue | None = None
        if selector is None and message.message_group is None:
            queues = self.transport.cached_write_queues(message.topic)
            if queues:
                mq = queues[next(self._round_robin) % len(queues)]
                try:
                    if self.transport.start_send(
                        mq, message, producer_group=self.group, timeout_s=self.send_timeout_s, done=first_done
                    ):
                        return future
                except errors.TxmqError:
                    pass  # not sent; the general way below sends it again and reports what fails
        task = loop.create_task(self._send_with_retries([message], selector, arg, None, self.send_timeout_s))
        task.add_done_callback(task_done)
        return future

    def _may_retry(self, error: errors.TxmqError, attempt: int) -> bool:
        return error.retriable and attempt < self.retries and self.status is ClientStatus.RUNNING

    async def _retry_async(
        self, message: Message, error: errors.TxmqError, mq: MessageQueue | None
    ) -> list[SendResult]:
        """``send_async``'s retries after a first attempt started in place failed with ``error``."""
        await self._before_retry(error, 0, mq, message.topic)
        return await self._send_with_retries([message], None, None, None, self.send_timeout_s, attempt=1)

    async def send_oneway(
        self, message: Message, *, selector: MessageQueueSelector | None = None, arg: Any = None
    ) -> None:
        """Write the message and return without waiting for the broker (no result, no retry).

        The fastest and least safe send: a message lost with its connection is not reported::

            await producer.send_oneway(Message("metrics", b"cpu=0.4"))
        """
        self._require_running()
        self._validate(message)
        mq, _ = await self._pick(message, selector, arg, 0)
        await self.transport.send_oneway(mq, message, producer_group=self.group)

    async def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as one atomic request (all stored, or none).

        No delay and no transaction in a batch; at most 4 MiB of bodies (use ``split_batches`` for
        more)::

            for batch in split_batches(messages):
                results = await producer.send_batch(batch)
        """
        window = self._require_running()
        if not messages:
            raise errors.InvalidArgument("the batch is empty")
        topic = messages[0].topic
        total = -1
        if PLAIN_TOTAL is not None:
            # the first message checked in full, then one C pass over the batch: a batch of plain
            # messages of that topic passes every check of the loop below (_single.plain_total_py)
            self._validate(messages[0])
            total = PLAIN_TOTAL(messages, topic, limits.body_bytes_max)
        if total < 0:
            for message in messages:
                self._validate(message)
                if message.topic != topic:
                    raise errors.InvalidArgument("every message of a batch must have the same topic")
                if message.delay_level or message.delivery_timestamp_ms is not None:
                    raise errors.InvalidArgument("delay messages cannot be sent in a batch")
            total = sum(len(m.body) for m in messages)
        if len(messages) > limits.batch_count_max:
            raise errors.PayloadTooLarge("batch message count", len(messages), limits.batch_count_max)
        if total > limits.batch_bytes_max:
            raise errors.PayloadTooLarge("batch", total, limits.batch_bytes_max)
        await window.acquire(total, self.send_timeout_s)
        try:
            return await self._send_with_retries(messages, None, None, queue, self.send_timeout_s)
        finally:
            window.release(total)
