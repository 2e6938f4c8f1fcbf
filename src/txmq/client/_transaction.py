"""``TransactionProducer``: half message, local transaction, END_TRANSACTION; and answering check-backs.

The flow (RocketMQ's): the half message is stored invisible; ``listener.execute_local_transaction(msg,
arg)`` runs; its answer commits (the message becomes visible), rolls back (it never does) or stays
unknown. An unknown outcome, a lost END_TRANSACTION or a crashed producer leave the half message
pending; the broker then asks a live producer of the group (check-back), which calls
``listener.check_local_transaction(msg)`` and answers.

Blocking listener methods run in bounded thread pools (``execute_workers``, ``check_workers``), so a
slow database never stalls the event loop; ``async def`` listener methods are awaited directly. Checks
beyond ``max_pending_checks`` are dropped (the broker asks again). ``close()`` stops taking checks,
finishes and answers those already accepted, then disconnects.

The message handed to the listener is a ``MessageView`` whose ``transaction_id`` is the broker's id of
the half message, so ``TableBackedListener`` can record it with the business change.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Final, cast

from txmq.client._backoff import Backoff, ClientStatus
from txmq.client._factory import TransportName
from txmq.client._producer import MAX_IN_FLIGHT, MAX_IN_FLIGHT_BYTES, Producer
from txmq.client._remoting import RemotingTransport
from txmq.client._selectors import entry_bytes
from txmq.client._single import OFFSET_ID_OFFSET as _OFFSET_ID_OFFSET
from txmq.client._single import TRANSACTIONAL_COPY as _TRANSACTIONAL_COPY
from txmq.client._transport import CheckRequest, TransactionRef, Transport
from txmq.client.transaction_state import LocalTransactionState, TransactionListener
from txmq.common import errors, msgid
from txmq.common.fastinit import slot_maker
from txmq.common.message import Message, MessageQueue, MessageType, MessageView, SendResult

try:  # mypyc reads the decorator at compile time; mypy_extensions is not a run-time dependency
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover - pure Python without mypy installed: a decorator doing nothing

    def mypyc_attr(*_args: object, **_kwargs: object) -> Callable[[type], type]:  # type: ignore[misc]
        return lambda cls: cls


log = logging.getLogger(__name__)

_IS_ASYNC_MAX = 64  # listener callables remembered as coroutine functions or not

_DECISION = {
    LocalTransactionState.COMMIT_MESSAGE: True,
    LocalTransactionState.ROLLBACK_MESSAGE: False,
    LocalTransactionState.UNKNOW: None,
}


# The three frozen slotted dataclasses a transaction builds are made from their field values in order
# (common.fastinit.slot_maker: with the C extension common/_slots.c one C call that stores each slot,
# else object.__new__ plus the slot descriptors' __set__): calling the class from compiled code runs
# slot_init's interpreted __init__ (MessageView: ~20k instructions per half), and a descriptor's
# __set__ is ~460 instructions a field. tests/unit/test_tx_fastbuild.py holds each to the class call
# with the same arguments, field by field; slot_maker checks at import that the field lists match.
_MAKE_VIEW: Final = slot_maker(
    MessageView,
    (
        "topic", "body", "message_id", "queue_id", "queue_offset", "commit_log_offset",
        "born_timestamp_ms", "store_timestamp_ms", "tags", "keys", "properties", "message_group",
        "delivery_timestamp_ms", "message_type", "reconsume_times", "delivery_attempt", "receipt_handle",
        "transaction_id", "born_host", "store_host", "store_size", "raw_properties",
    ),
)  # fmt: skip
_MAKE_REF: Final = slot_maker(
    TransactionRef,
    (
        "topic", "message_id", "transaction_id", "commit_log_offset", "queue_offset", "offset_message_id",
        "broker_name", "broker_addr",
    ),
)  # fmt: skip
_MAKE_MESSAGE: Final = slot_maker(
    Message,
    (
        "topic", "body", "tags", "keys", "properties", "message_group", "delivery_timestamp_ms",
        "delay_level", "message_id", "transactional", "check_immunity_s",
    ),
)  # fmt: skip


def half_view(message: Message, half: SendResult) -> MessageView:
    """What the listener sees during ``execute_local_transaction``: the message plus its transaction id."""
    return half_view_at(message, half, int(time.time() * 1000))


def half_view_at(message: Message, half: SendResult, now: int) -> MessageView:
    """``half_view`` born and stored at ``now`` (ms): ``MessageView(topic=message.topic, body=
    bytes(message.body), message_id=half.message_id, queue_id=half.queue.queue_id, queue_offset=
    half.queue_offset, commit_log_offset=<from the offset message id, or -1>, born_timestamp_ms=now,
    store_timestamp_ms=now, tags=message.tags, keys=message.keys, properties=message.properties,
    message_type=MessageType.TRANSACTION, transaction_id=half.transaction_id)``, the other fields at
    their defaults."""
    offset_id = half.offset_message_id or ""
    offset: int | None
    if _OFFSET_ID_OFFSET is not None and type(offset_id) is str:  # one C call (the reference's answer)
        offset = _OFFSET_ID_OFFSET(offset_id)
    else:
        offset = msgid.offset_of_offset_message_id(offset_id)
    body = message.body
    if type(body) is not bytes:  # bytes(body) is body itself for exact bytes (no call for it)
        body = bytes(body)
    view: MessageView = _MAKE_VIEW(
        message.topic, body, half.message_id, half.queue.queue_id, half.queue_offset,
        -1 if offset is None else offset, now, now, message.tags, message.keys, message.properties, None,
        None, MessageType.TRANSACTION, 0, 1, None, half.transaction_id, "", "", 0, None,
    )  # fmt: skip
    return view


def ref_of(view: MessageView, half: SendResult) -> TransactionRef:
    """``TransactionRef(topic=view.topic, message_id=half.message_id, transaction_id=
    half.transaction_id or "", commit_log_offset=view.commit_log_offset, queue_offset=
    half.queue_offset, offset_message_id=half.offset_message_id, broker_name=half.queue.broker_name)``."""
    ref: TransactionRef = _MAKE_REF(
        view.topic, half.message_id, half.transaction_id or "", view.commit_log_offset,
        half.queue_offset, half.offset_message_id, half.queue.broker_name, None,
    )  # fmt: skip
    return ref


# What a worker thread gets: the loop to answer on, the future it answers, the call. None: stop.
_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...], "Workers"]
_live_queues: dict[queue.SimpleQueue[_Job | None], int] = {}  # queue -> its threads, until shutdown
# threading's hook run at interpreter exit before it joins non-daemon threads (concurrent.futures
# stops its workers with it); where it is missing, the workers are daemon threads
_register_atexit: Final[Callable[[Callable[[], None]], None] | None] = getattr(
    threading, "_register_atexit", None
)
_exit_hook_registered = False
_exiting = False


def _stop_at_exit() -> None:
    """Run by ``threading`` at interpreter exit before it joins the threads (as ``concurrent.futures``
    does for its pools): every worker of a pool never shut down finishes its queue, then stops."""
    global _exiting
    _exiting = True
    for jobs, threads in list(_live_queues.items()):
        for _ in range(threads):
            jobs.put(None)
    _live_queues.clear()


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """A worker thread: run each job (``_run_job``) until told to stop."""
    while True:
        job = jobs.get()
        if job is None:
            return
        _run_job(job)
        job = None  # nothing of a finished job is kept while the next is awaited


def _run_job(job: _Job) -> None:
    """Run a job's call and hand its outcome to the job's loop (one ``call_soon_threadsafe``); a job
    whose future was cancelled before it started is not run."""
    loop, future, fn, args, workers = job
    result: Any = None
    error: BaseException | None = None
    if not future.cancelled():  # cancelled while queued: never runs (run_in_executor's promise)
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the awaiting task
            error = exc
    try:
        loop.call_soon_threadsafe(workers.done, future, result, error)
    except RuntimeError:  # the loop is closed: nobody awaits the outcome any more
        pass


class Workers:
    """Up to ``max_workers`` threads for blocking listener calls (``ThreadPoolExecutor``'s job
    without its per-call ``Future``, work item, locks and interpreted submit/run: ~25k instructions
    a call there). ``submit`` is called on the loop's thread; a thread is started when more calls are
    unanswered than threads run; the outcome comes back as one ``call_soon_threadsafe``.
    ``shutdown`` lets the threads finish what is queued, then stop; at interpreter exit they are
    stopped the same way before ``threading`` joins them (never killed in a call)."""

    def __init__(self, max_workers: int, name: str) -> None:
        if max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._max = max_workers
        self._name = name
        self._threads: list[threading.Thread] = []
        self._unanswered = 0  # submitted and not yet answered on the loop (loop thread only)
        self._shut = False

    def submit(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        fn: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        """Run ``fn(*args)`` on a worker and settle ``future`` (on ``loop``) with its outcome."""
        if self._shut or _exiting:
            raise RuntimeError("cannot schedule new calls after shutdown")
        self._unanswered += 1
        if self._unanswered > len(self._threads) and len(self._threads) < self._max:
            try:
                self._start_thread()
            except BaseException:
                self._unanswered -= 1
                raise
        self._jobs.put((loop, future, fn, args, self))

    def _start_thread(self) -> None:
        global _exit_hook_registered
        if not _exit_hook_registered:
            threading._register_atexit(_stop_at_exit)  # type: ignore[attr-defined]
            _exit_hook_registered = True
        thread = threading.Thread(target=_work, args=(self._jobs,), name=f"{self._name}_{len(self._threads)}")
        thread.start()
        self._threads.append(thread)
        _live_queues[self._jobs] = len(self._threads)

    def done(self, future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        """On the loop: one call answered."""
        self._unanswered -= 1
        _settle(future, result, error)

    def shutdown(self) -> None:
        """No new calls; the threads finish the queued ones, then stop (nothing is waited for)."""
        if self._shut:
            return
        self._shut = True
        if _live_queues.pop(self._jobs, None) is not None:
            for _ in self._threads:
                self._jobs.put(None)

    @property
    def threads(self) -> int:
        return len(self._threads)


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled, and still a class users may subclass
class TransactionProducer(Producer):
    """A producer of transactional messages for one producer group and its listener.

    ::

        class Transfer:
            def execute_local_transaction(self, msg, arg):
                db.debit(arg["account"], arg["amount"], tx_id=msg.transaction_id)
                return LocalTransactionState.COMMIT_MESSAGE

            def check_local_transaction(self, msg):
                return LocalTransactionState.COMMIT_MESSAGE if db.has(msg.transaction_id) else \\
                    LocalTransactionState.ROLLBACK_MESSAGE

        async with TransactionProducer("transfers", Transfer(), "127.0.0.1:9876") as producer:
            half, state = await producer.send_message_in_transaction(Message("credits", b"..."), arg)
    """

    def __init__(
        self,
        group: str,
        listener: TransactionListener,
        endpoints: str = "127.0.0.1:9876",
        *,
        transport: TransportName | Transport = "remoting",
        send_timeout_s: float = 3.0,
        retries: int = 2,
        execute_workers: int = 8,
        check_workers: int = 4,
        max_pending_checks: int = 2000,
        # Producer's other options, named (no **options: mypyc cannot write the text signature of a
        # compiled __init__ that overrides its base's with a ** parameter)
        max_in_flight: int = MAX_IN_FLIGHT,
        max_in_flight_bytes: int = MAX_IN_FLIGHT_BYTES,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__(
            endpoints, group=group, transport=transport, send_timeout_s=send_timeout_s, retries=retries,
            max_in_flight=max_in_flight, max_in_flight_bytes=max_in_flight_bytes, backoff=backoff,
        )  # fmt: skip
        if not isinstance(listener, TransactionListener):
            raise errors.InvalidArgument(
                "listener needs execute_local_transaction(msg, arg) and check_local_transaction(msg)"
            )
        self.listener = listener
        self._execute_pool = Workers(execute_workers, "txmq-local-tx")
        self._check_pool = Workers(check_workers, "txmq-check")
        self._max_pending_checks = max_pending_checks
        self._checks: set[asyncio.Task[None]] = set()
        self._is_async: dict[object, bool] = {}

    async def start(self) -> None:
        self.transport.set_check_handler(self._on_check)
        await super().start()

    async def close(self) -> None:
        """Stop taking checks, answer the ones accepted, then close like ``Producer.close``."""
        if self.status is not ClientStatus.RUNNING:
            return
        self.transport.set_check_handler(None)
        if self._checks:
            await asyncio.wait(list(self._checks), timeout=self.send_timeout_s * 2)
        await super().close()
        self._execute_pool.shutdown()
        self._check_pool.shutdown()

    async def __aenter__(self) -> TransactionProducer:
        await self.start()
        return self

    # ---- running listener code --------------------------------------------------------------------
    async def _run(self, pool: Workers, fn: Callable[..., Any], *args: Any) -> Any:
        # whether a bound method is a coroutine function is its function's: asked once, not per call
        key = getattr(fn, "__func__", fn)
        is_async = self._is_async.get(key)
        if is_async is None:
            if len(self._is_async) >= _IS_ASYNC_MAX:
                self._is_async.clear()
            is_async = self._is_async[key] = inspect.iscoroutinefunction(fn)
        if is_async:
            return await fn(*args)
        # ``run_in_executor`` without an executor's future and work item: a worker thread hands the
        # outcome to the loop itself (one call_soon_threadsafe), which is what a transaction waits on;
        # cancelling the awaiting task cancels ``future``, and a call not started by then never runs
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pool.submit(loop, future, fn, args)
        return await future

    async def _execute(self, view: MessageView, arg: Any) -> LocalTransactionState:
        try:
            fn = self.listener.execute_local_transaction
            if self._is_async.get(getattr(fn, "__func__", fn)) is True:  # known async: awaited here, as
                state = await cast(Awaitable[Any], fn(view, arg))  # _run would (one coroutine less)
            else:
                state = await self._run(self._execute_pool, fn, view, arg)
        except Exception:
            log.exception("execute_local_transaction raised for %s; answering UNKNOW", view.transaction_id)
            return LocalTransactionState.UNKNOW
        return _as_state(state)

    # ---- the transaction --------------------------------------------------------------------------
    async def send_half(self, message: Message) -> tuple[SendResult, MessageView]:
        """Store the half message (invisible until committed); most code uses the methods below."""
        window = self._require_running()
        message = _transactional(message)
        self._validate(message, transactional_ok=True)
        nbytes = entry_bytes(message)
        if not window.try_acquire(nbytes):
            await window.acquire(nbytes, self.send_timeout_s)
        try:
            half = await self._first_half(message)
        finally:
            window.release(nbytes)
        if not half.transaction_id:
            raise errors.ProtocolError("the broker returned no transaction id for a half message")
        return half, half_view(message, half)

    async def _first_half(self, message: Message) -> SendResult:
        """Send the half message. The common case (route known, connection open, no message group)
        starts the first attempt in place and awaits its answer, without the retry loop's coroutines;
        a retriable failure goes on in that loop, as ``Producer.send_async`` does."""
        queues = self.transport.cached_write_queues(message.topic) if message.message_group is None else None
        if queues:
            mq = queues[next(self._round_robin) % len(queues)]
            if isinstance(self.transport, RemotingTransport):  # awaits the channel's future itself
                return await self._first_half_remoting(self.transport, mq, message)
            future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()

            def done(result: SendResult | None, error: BaseException | None) -> None:
                _settle(future, result, error)

            try:
                started = self.transport.start_send(
                    mq, message, producer_group=self.group, timeout_s=self.send_timeout_s, done=done
                )
            except errors.TxmqError:
                started = False  # not sent; the general way below sends it and reports what fails
            if started:
                try:
                    return await future
                except errors.TxmqError as exc:
                    await self._before_retry(exc, 0, mq, message.topic)
                    return (
                        await self._send_with_retries([message], None, None, None, self.send_timeout_s, 1)
                    )[0]
        return (await self._send_with_retries([message], None, None, None, self.send_timeout_s))[0]

    async def _first_half_remoting(
        self, transport: RemotingTransport, mq: MessageQueue, message: Message
    ) -> SendResult:
        """``_first_half``'s first attempt over remoting: the response's future is awaited here and
        read into the result in this task (one wake-up, no callback hop and second future)."""
        try:
            started = transport.start_send_request(
                mq, message, producer_group=self.group, timeout_s=self.send_timeout_s
            )
        except errors.TxmqError:
            started = None  # not sent; the general way below sends it and reports what fails
        if started is None:
            return (await self._send_with_retries([message], None, None, None, self.send_timeout_s))[0]
        try:
            return transport.send_result(mq, started[1], await started[0])
        except errors.TxmqError as exc:
            await self._before_retry(exc, 0, mq, message.topic)
            return (await self._send_with_retries([message], None, None, None, self.send_timeout_s, 1))[0]

    async def end(self, half: SendResult, view: MessageView, state: LocalTransactionState) -> None:
        """Tell the broker the outcome (nothing is sent for ``UNKNOW``: the check-back decides)."""
        decision = _DECISION[state]
        if decision is None:
            return
        ref = ref_of(view, half)
        transport = self.transport
        try:  # oneway: sent in place when the route and the connection are at hand
            if not transport.start_end_transaction(
                ref, producer_group=self.group, commit=decision, from_check=False
            ):
                await transport.end_transaction(
                    ref, producer_group=self.group, commit=decision, from_check=False
                )
        except errors.TxmqError as exc:  # the check-back repairs a lost decision
            log.warning(
                "END_TRANSACTION for %s failed (%s); check-back will resolve it", half.transaction_id, exc
            )

    async def send_message_in_transaction(
        self, message: Message, arg: Any = None
    ) -> tuple[SendResult, LocalTransactionState]:
        """Send a half message, run the local transaction, then commit or roll back the message.

        Returns the half message's ``SendResult`` (its ``transaction_id`` names the transaction) and the
        state the listener returned::

            half, state = await producer.send_message_in_transaction(Message("credits", b"42"), {"to": "B"})
            assert state is LocalTransactionState.COMMIT_MESSAGE
        """
        half, view = await self.send_half(message)
        state = await self._execute(view, arg)
        await self.end(half, view, state)
        return half, state

    def transaction(self, message: Message) -> Transaction:
        """An async context manager: the half message is sent on entry, committed on a clean exit and
        rolled back when the block raises. ``tx.leave_unknown()`` sends no decision at all, and the
        broker's check-back (``listener.check_local_transaction``) settles it later::

            async with producer.transaction(Message("credits", b"42")) as tx:
                await db.debit(account, 42, tx_id=tx.transaction_id)
        """
        return Transaction(self, message)

    # ---- check-back ---------------------------------------------------------------------------------
    async def _on_check(self, request: CheckRequest) -> None:
        if request.producer_group and request.producer_group != self.group:
            log.debug("check for group %s ignored by producer of %s", request.producer_group, self.group)
            return
        if len(self._checks) >= self._max_pending_checks:
            log.warning("%d checks pending; dropping one (the broker will ask again)", len(self._checks))
            return
        task = asyncio.get_running_loop().create_task(self._answer(request))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer(self, request: CheckRequest) -> None:
        try:
            raw = await self._run(self._check_pool, self.listener.check_local_transaction, request.message)
            state = _as_state(raw)
        except Exception:
            log.exception("check_local_transaction raised for %s", request.ref.transaction_id)
            return
        decision = _DECISION[state]
        if decision is None:
            return
        try:
            await self.transport.end_transaction(
                request.ref, producer_group=self.group, commit=decision, from_check=True
            )
        except errors.TxmqError as exc:
            log.warning("answering the check for %s failed: %s", request.ref.transaction_id, exc)


class Transaction:
    """One transaction of ``TransactionProducer.transaction``; see there."""

    def __init__(self, producer: TransactionProducer, message: Message) -> None:
        self._producer = producer
        self._message = message
        self._state: LocalTransactionState | None = None
        self.send_result: SendResult | None = None
        self.message: MessageView | None = None

    @property
    def transaction_id(self) -> str:
        if self.send_result is None or not self.send_result.transaction_id:
            raise errors.InvalidTransactionId("the half message has not been sent yet")
        return self.send_result.transaction_id

    def leave_unknown(self) -> None:
        """Send no decision on exit; the broker's check-back resolves the transaction."""
        self._state = LocalTransactionState.UNKNOW

    def rollback_only(self) -> None:
        """Roll back on exit even without an exception."""
        self._state = LocalTransactionState.ROLLBACK_MESSAGE

    async def __aenter__(self) -> Transaction:
        self.send_result, self.message = await self._producer.send_half(self._message)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self.send_result is not None
        assert self.message is not None
        if exc_type is not None:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            state = self._state or LocalTransactionState.COMMIT_MESSAGE
        self._state = state
        await self._producer.end(self.send_result, self.message, state)

    @property
    def state(self) -> LocalTransactionState | None:
        """The outcome sent on exit (``None`` while the block runs)."""
        return self._state if self.send_result is not None else None


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting task was cancelled
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _transactional(message: Message) -> Message:
    """``message`` as a transaction sends it: itself when flagged ``transactional``, else a copy that
    is; one C call for an exact ``Message`` (``_batchsend.transactional_copy``), else
    ``_transactional_py``, the reference (tests/property/test_tx_native.py)."""
    if _TRANSACTIONAL_COPY is not None:
        made: Message | None = _TRANSACTIONAL_COPY(message)
        if made is not None:
            return made
    return _transactional_py(message)


def _transactional_py(message: Message) -> Message:
    if message.transactional:
        return message
    # dataclasses.replace(message, transactional=True), without its walk of the fields or the class call
    copy: Message = _MAKE_MESSAGE(
        message.topic, message.body, message.tags, message.keys, message.properties,
        message.message_group, message.delivery_timestamp_ms, message.delay_level, message.message_id,
        True, message.check_immunity_s,
    )  # fmt: skip
    return copy


def _as_state(value: Any) -> LocalTransactionState:
    if isinstance(value, LocalTransactionState):
        return value
    log.warning("a transaction listener returned %r, not a LocalTransactionState; treating as UNKNOW", value)
    return LocalTransactionState.UNKNOW
