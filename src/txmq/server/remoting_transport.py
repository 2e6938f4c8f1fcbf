"""The asyncio driver of a remoting connection, for both ends (broker and client).

``RemotingEndpoint`` is an ``asyncio.Protocol`` that feeds bytes through the sans-IO
``RemotingConnection`` and does only what needs a socket:

* requests from the peer run as concurrent tasks (pipelining: many in flight, answered by opaque in
  whatever order they finish; a long-polling pull never blocks the requests behind it);
* replies are coalesced: everything written during one loop iteration goes out in one
  ``transport.write``;
* our own requests wait on futures matched by opaque (``request``), or go out ``oneway``;
* a malformed frame closes that connection with a logged reason and nothing else;
* reading pauses while too many requests of this connection are being handled (back-pressure);
* when the connection closes, requests already received still run to the end (a oneway END_TRANSACTION
  sent just before a producer disconnects is a decision like any other); only long-polling pulls, which
  merely wait on the peer's behalf, are cancelled.

``connect(host, port, handler=...)`` opens a client endpoint; ``serve(host, port, handler)`` a server.
A handler is ``async (request, endpoint) -> response | None`` (None for oneway requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any, Final, NamedTuple

from txmq.common import errors
from txmq.common.completion import Completion
from txmq.protocol.remoting.codes import LanguageCode, RequestCode, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.connection import (
    NEED_DATA,
    ConnectionClosed,
    RemotingConnection,
    Response,
    UnmatchedResponse,
)
from txmq.protocol.remoting.errors import RemoteProtocolError

log = logging.getLogger(__name__)

Handler = Callable[[RemotingCommand, "RemotingEndpoint"], Awaitable[RemotingCommand | None]]


class Deferred(NamedTuple):
    """An answer that waits for ``durable``: the transport calls ``finish(None)`` once it completed,
    ``finish(exc)`` if it failed, and writes what ``finish`` returns (no task per request)."""

    durable: Awaitable[None]
    finish: Callable[[Exception | None], RemotingCommand | bytes]  # bytes: the encoded frame


InlineResult = RemotingCommand | Deferred | Coroutine[Any, Any, RemotingCommand | None] | None
"""What a handler's ``inline(request, endpoint)`` returns, called from the read callback: the answer
(None: none, for oneway requests), a ``Deferred`` answer, or a coroutine to run as a task."""
Inline = Callable[[RemotingCommand, "RemotingEndpoint"], InlineResult]

_HANDLING_MAX: Final = 4096  # requests of one connection handled at once before reading pauses
_HANDLING_RESUME: Final = _HANDLING_MAX // 2
# requests whose handlers only wait for the peer (long polls): cancelled when the peer goes away. Every
# other handler finishes: cancelling one mid-way could leave a write stored but its bookkeeping undone.
_CANCELLED_ON_CLOSE: Final = frozenset({RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE})


class RemotingEndpoint(asyncio.Protocol):
    """One remoting connection, either end. Not thread-safe; lives on one event loop."""

    def __init__(self, handler: Handler | None = None, *, language: LanguageCode = LanguageCode.JAVA) -> None:
        self._conn = RemotingConnection(language=language)
        self._handler = handler
        # a handler may answer from the read callback: ``handler.inline(request, endpoint)``
        self._answer_inline: Inline | None = getattr(handler, "inline", None)
        self._deferred = 0  # requests waiting on a Deferred (they count for back-pressure like tasks)
        # the requests waiting on the last Deferred's future, answered by one done callback: appends
        # of one group share their future (``shared`` waiters), so a read's sends share a callback
        self._deferred_future: asyncio.Future[None] | Completion | None = None
        self._deferred_waiting: list[
            tuple[RemotingCommand, Callable[[Exception | None], RemotingCommand | bytes]]
        ] = []
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._long_polls: set[asyncio.Task[None]] = set()  # the subset cancelled on close
        self._reading_paused = False
        self._closed = False
        self._close_callbacks: list[Callable[[RemotingEndpoint], None]] = []
        self.closed_future: asyncio.Future[None] = self._loop.create_future()
        self.peer = ""
        self.local = ""
        self.attachments: dict[str, object] = {}  # per-connection state of the layer above (client ids ...)

    # ------------------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a stream transport (uvloop's is not a subclass)
        self.peer = _addr(transport.get_extra_info("peername"))
        self.local = _addr(transport.get_extra_info("sockname"))
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        try:
            self._conn.receive_data(data)
            self._drain_events()
        except RemoteProtocolError as exc:
            log.warning("closing remoting connection from %s: %s", self.peer, exc)
            self._abort()

    def eof_received(self) -> bool | None:
        with contextlib.suppress(errors.ProtocolError):
            self._conn.receive_data(b"")
            self._drain_events()
        return None  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._transport = None
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(errors.ConnectionError_(f"connection to {self.peer} closed"))
        self._waiting.clear()
        for task in list(self._long_polls):
            task.cancel()
        for callback in self._close_callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("a close callback failed")
        if not self.closed_future.done():
            self.closed_future.set_result(None)

    # ------------------------------------------------------------------------------ events
    def _drain_events(self) -> None:
        conn = self._conn
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                return
            if isinstance(event, RemotingCommand):
                self._start_handling(event)
            elif isinstance(event, Response):
                future = self._waiting.pop(event.command.opaque, None)
                if future is not None and not future.done():
                    future.set_result(event.command)
            elif isinstance(event, UnmatchedResponse):
                log.debug("late or unknown response opaque=%d from %s", event.command.opaque, self.peer)
            elif isinstance(event, ConnectionClosed):
                return

    def _start_handling(self, request: RemotingCommand) -> None:
        handler = self._handler
        if handler is None:
            if not request.is_oneway:
                self.write(make_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "no handler here"))
            return
        inline = self._answer_inline
        if inline is None:
            pending: Awaitable[RemotingCommand | None] = handler(request, self)
        else:
            try:
                result = inline(request, self)
            except Exception:
                log.exception("remoting handler for code %d failed", request.code)
                result = make_response(request, ResponseCode.SYSTEM_ERROR, "internal error")
            if result is None:
                return
            if type(result) is RemotingCommand:
                if not request.is_oneway:
                    self.write(result)
                return
            if type(result) is Deferred:
                self._defer(request, result)
                return
            pending = result  # type: ignore[assignment]  # the coroutine left
        task = self._loop.create_task(self._handle(request, pending))
        self._tasks.add(task)
        if request.code in _CANCELLED_ON_CLOSE:
            self._long_polls.add(task)
        task.add_done_callback(self._task_done)
        self._check_pause()

    def _check_pause(self) -> None:
        if (
            len(self._tasks) + self._deferred >= _HANDLING_MAX
            and not self._reading_paused
            and self._transport is not None
        ):
            self._reading_paused = True
            self._transport.pause_reading()

    def _check_resume(self) -> None:
        if (
            self._reading_paused
            and len(self._tasks) + self._deferred <= _HANDLING_RESUME
            and self._transport is not None
        ):
            self._reading_paused = False
            self._transport.resume_reading()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._long_polls.discard(task)
        if self._reading_paused:
            self._check_resume()

    def _defer(self, request: RemotingCommand, deferred: Deferred) -> None:
        durable = deferred.durable
        # a Completion (a SYNC group's shared waiter) runs _settle_all inside the callback that makes
        # the group durable, before the group's dispatch: the answers are written then and there
        if type(durable) is not Completion and not isinstance(durable, asyncio.Future):
            self._settle(request, deferred.finish, None)  # already durable (an awaitable that is done)
            return
        self._deferred += 1
        if durable is self._deferred_future and not durable.done():
            self._deferred_waiting.append((request, deferred.finish))
        else:
            waiting = [(request, deferred.finish)]
            self._deferred_future, self._deferred_waiting = durable, waiting
            durable.add_done_callback(partial(self._settle_all, waiting))
        self._check_pause()

    def _settle_all(
        self,
        waiting: list[tuple[RemotingCommand, Callable[[Exception | None], RemotingCommand | bytes]]],
        durable: asyncio.Future[None] | Completion,
    ) -> None:
        """Answer, in order, every deferred request that waited on ``durable`` (a done callback), and
        write the answers now, not at the end of the loop turn: run by a ``Completion``, this is the
        group commit's completing callback, which dispatches the group right after (the answers do
        not wait for the ConsumeQueue writes); run by a future, this is already a turn of its own."""
        if self._deferred_waiting is waiting:
            self._deferred_future, self._deferred_waiting = None, []
        self._deferred -= len(waiting)
        if self._reading_paused:
            self._check_resume()
        if durable.cancelled():
            exc: Exception | None = errors.StorageError("the write was cancelled")
        else:
            failure = durable.exception()
            exc = failure if failure is None or isinstance(failure, Exception) else RuntimeError(failure)
        self._flush_scheduled = True  # queued by _answer without scheduling a flush: written below
        try:
            for request, finish in waiting:
                self._answer(request, finish, exc)
        finally:
            self._flush()

    def _settle(
        self,
        request: RemotingCommand,
        finish: Callable[[Exception | None], RemotingCommand | bytes],
        durable: asyncio.Future[None] | None,
    ) -> None:
        """Answer a deferred request whose awaitable is already done (``durable`` None)."""
        self._answer(request, finish, None)

    def _answer(
        self,
        request: RemotingCommand,
        finish: Callable[[Exception | None], RemotingCommand | bytes],
        exc: Exception | None,
    ) -> None:
        try:
            response = finish(exc)
        except Exception:
            log.exception("remoting handler for code %d failed", request.code)
            response = make_response(request, ResponseCode.SYSTEM_ERROR, "internal error")
        if request.is_oneway:
            return
        if type(response) is bytes:
            self.write_frame(response)
        else:
            self.write(response)  # type: ignore[arg-type]  # a RemotingCommand

    async def _handle(self, request: RemotingCommand, pending: Awaitable[RemotingCommand | None]) -> None:
        try:
            response = await pending
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("remoting handler for code %d failed", request.code)
            response = (
                None
                if request.is_oneway
                else make_response(request, ResponseCode.SYSTEM_ERROR, "internal error")
            )
        if response is not None and not request.is_oneway:
            self.write(response)

    # ------------------------------------------------------------------------------ writing
    def is_open(self) -> bool:
        return not self._closed and self._transport is not None and not self._transport.is_closing()

    def write(self, command: RemotingCommand) -> bool:
        """Queue ``command`` for the next coalesced write; False if the connection is gone."""
        if not self.is_open():
            return False
        try:
            data = self._conn.send(command)
        except errors.ProtocolError as exc:
            log.warning("cannot send code %d to %s: %s", command.code, self.peer, exc)
            return False
        self._queue(data)
        return True

    def write_frame(self, data: bytes) -> bool:
        """Queue an encoded response frame (``frame.encode_send_response``) like :meth:`write`."""
        if not self.is_open():
            return False
        self._queue(data)
        return True

    def _queue(self, data: bytes) -> None:
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if self._transport is not None and out:
            self._transport.write(b"".join(out) if len(out) > 1 else out[0])

    # ------------------------------------------------------------------------------ our requests
    def new_request(
        self, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"", *, oneway: bool = False
    ) -> RemotingCommand:
        return self._conn.new_request(code, ext_fields, body, oneway=oneway)

    def request_nowait(
        self, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b""
    ) -> asyncio.Future[RemotingCommand]:
        """Send a request; the future resolves to its response (for pipelining many at once)."""
        command = self._conn.new_request(code, ext_fields, body)
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        if not self.write(command):
            future.set_exception(errors.ConnectionError_(f"connection to {self.peer} is closed"))
            return future
        self._waiting[command.opaque] = future
        return future

    async def request(
        self, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"", *, timeout: float = 5.0
    ) -> RemotingCommand:
        """Send a request and wait for its response; ``RequestTimeout`` after ``timeout`` seconds."""
        command = self._conn.new_request(code, ext_fields, body)
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        if not self.write(command):
            raise errors.ConnectionError_(f"connection to {self.peer} is closed")
        self._waiting[command.opaque] = future
        # a timer handle, not asyncio.wait_for: no extra task per request on the hot path
        timer = self._loop.call_later(timeout, self._expire, command.opaque, future)
        try:
            return await future
        finally:
            timer.cancel()

    def _expire(self, opaque: int, future: asyncio.Future[RemotingCommand]) -> None:
        if self._waiting.get(opaque) is future:
            del self._waiting[opaque]
            self._conn.forget(opaque)
        if not future.done():
            future.set_exception(errors.RequestTimeout(f"no response to request {opaque} from {self.peer}"))

    def oneway(self, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"") -> bool:
        """Send a oneway request; True if it was handed to an open connection."""
        return self.write(self._conn.new_request(code, ext_fields, body, oneway=True))

    # ------------------------------------------------------------------------------ closing
    def add_close_callback(self, callback: Callable[[RemotingEndpoint], None]) -> None:
        self._close_callbacks.append(callback)

    def _abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    async def close(self) -> None:
        """Flush what is queued, close, and wait until the connection is gone."""
        if self._transport is not None and not self._transport.is_closing():
            self._flush()
            self._transport.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self.closed_future


def _addr(value: object) -> str:
    if isinstance(value, tuple) and len(value) >= 2:
        return f"{value[0]}:{value[1]}"
    return str(value or "")


async def connect(
    host: str,
    port: int,
    *,
    handler: Handler | None = None,
    language: LanguageCode = LanguageCode.PYTHON,
    timeout: float = 5.0,
) -> RemotingEndpoint:
    """A client endpoint connected to ``host:port``; ``handler`` answers requests the server sends us."""
    loop = asyncio.get_running_loop()
    try:
        _, endpoint = await asyncio.wait_for(
            loop.create_connection(lambda: RemotingEndpoint(handler, language=language), host, port), timeout
        )
    except (OSError, TimeoutError) as exc:
        raise errors.ConnectionError_(f"cannot connect to {host}:{port}: {exc}") from None
    return endpoint


class RemotingServer:
    """A listening socket whose connections are ``RemotingEndpoint``s sharing one handler."""

    def __init__(self, server: asyncio.Server, endpoints: set[RemotingEndpoint]) -> None:
        self._server = server
        self._endpoints = endpoints

    @property
    def port(self) -> int:
        # getattr: uvloop's Server.sockets is a list, typeshed says tuple (mypyc would check it)
        sockets: Sequence[Any] = getattr(self._server, "sockets")  # noqa: B009
        return int(sockets[0].getsockname()[1])

    @property
    def endpoints(self) -> set[RemotingEndpoint]:
        return self._endpoints

    async def close(self) -> None:
        self._server.close()
        for endpoint in list(self._endpoints):
            await endpoint.close()
        await self._server.wait_closed()


def _too_many(limit: int) -> Handler:
    """The handler of a connection over the limit: every request gets SYSTEM_BUSY, then it is closed."""

    async def refuse(request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        asyncio.get_running_loop().create_task(endpoint.close())  # runs after the answer is queued
        return make_response(
            request,
            ResponseCode.SYSTEM_BUSY,
            f"too many connections: this broker accepts {limit}; retry later",
        )

    return refuse


async def serve(
    host: str, port: int, handler: Handler, *, connections_max: int | None = None
) -> RemotingServer:
    """Listen on ``host:port`` (0 picks a free port); every connection runs ``handler``. Connections
    beyond ``connections_max`` are answered SYSTEM_BUSY and closed, instead of exhausting the process."""
    endpoints: set[RemotingEndpoint] = set()

    def factory() -> RemotingEndpoint:
        if connections_max is not None and len(endpoints) >= connections_max:
            return RemotingEndpoint(_too_many(connections_max))
        endpoint = RemotingEndpoint(handler)
        endpoints.add(endpoint)
        endpoint.add_close_callback(endpoints.discard)
        return endpoint

    server = await asyncio.get_running_loop().create_server(factory, host, port, reuse_address=True)
    return RemotingServer(server, endpoints)
