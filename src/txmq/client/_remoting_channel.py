"""An asyncio driver for one remoting TCP connection, and a pool that reconnects on demand.

The protocol work (framing, opaques, pending table) is ``RemotingConnection``'s; this module only moves
bytes. Requests are pipelined: each gets a future keyed by its opaque and many may be in flight on one
connection. Requests the broker starts (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) go to an
``on_request`` callback, run as tasks so a slow callback never stalls the reader.

Frames are coalesced: what is sent during one event-loop turn goes out in one socket write at the end
of that turn (pipelined sends: one write for many requests instead of one each; a oneway
END_TRANSACTION shares the write of the next half message), or earlier, in pieces of about
``limits.client_write_hold_bytes_max``, when a turn sends more (the broker works on the first pieces while
the turn builds the rest instead of both sides taking turns). A request sent while nothing else is in
flight and nothing is held is written at once (one request at a time waits for no loop turn). Frames
keep their order on the connection, and none is held longer than the turn it was sent in.

A broken connection fails its pending requests with ``ConnectionError_`` (retriable). So does a silent
one: when a request times out and not one byte arrived on the connection since it was sent, the peer or
the network path is gone (a dropped route, a half-dead proxy, a broker stuck whole), not merely slow, and
the connection is closed, as RocketMQ's clients close a socket on a request timeout. Otherwise nothing
would ever leave it: a producer would keep its registration there and the broker's transaction
check-backs would vanish into it until the half messages were discarded. The pool opens a
new one on the next request, pausing with back-off and jitter after consecutive failures, and calls
``on_connect`` so the owner re-registers (heartbeats carry producer groups and subscriptions).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Final, NoReturn

from txmq.client._backoff import Backoff
from txmq.common import errors, limits
from txmq.protocol.remoting import (
    NEED_DATA,
    ConnectionClosed,
    Event,
    RemotingCommand,
    RemotingConnection,
    Response,
    UnmatchedResponse,
)
from txmq.protocol.remoting.codes import RPC_TYPE, SerializeType

log = logging.getLogger(__name__)

RequestHandler = Callable[["RemotingChannel", RemotingCommand], Awaitable[RemotingCommand | None]]
ConnectHook = Callable[["RemotingChannel"], Awaitable[None]]

_DRAIN_ABOVE_BYTES: Final = 1 << 20
_HOLD_BYTES_MAX: Final = limits.client_write_hold_bytes_max
# a request body at least this long is written as it is after its frame's head (``transport.writelines``)
# instead of being copied into one frame: a batch-100 body (~107 KB) cost the SDK ~147k instructions per
# batch in that copy; a smaller body is cheaper joined than written as a second buffer
_SPLIT_BODY_BYTES: Final = 16 * 1024
_READ_BYTES: Final = 256 * 1024  # one socket read of ordinary frames (asyncio's own read size)
# a frame at least this large is read straight into a buffer of its own (a pull answer of ~1 MiB:
# one copy from the socket instead of reads appended to the connection's buffer and copied out);
# that buffer is kept for the next large frame up to this size (no zero-fill, no fresh pages per frame)
_OWN_BUFFER_BYTES: Final = 64 * 1024
_OWN_BUFFER_KEPT_MAX: Final = 4 * 1024 * 1024
_DEADLINE_SLACK: Final = 1024  # answered entries a deadline queue may hold beyond twice those in flight


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``; raises ``InvalidArgument`` on anything else."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdecimal():
        raise errors.InvalidArgument(f"address {addr!r} is not host:port")
    return host, int(port)


class RemotingChannel(asyncio.BufferedProtocol):
    """One open connection; create with :meth:`open`.

    The channel is the connection's ``asyncio.BufferedProtocol``: the socket is read into the channel's
    own read buffer and the bytes go straight into the sans-IO connection and its events, with no
    stream reader, read task or wake-up per read. A frame of at least ``_OWN_BUFFER_BYTES`` (a pull
    answer) is read into a buffer of its own size once its prefix is in, and decoded from there."""

    def __init__(
        self,
        addr: str,
        on_request: RequestHandler | None,
        serialize_type: SerializeType = SerializeType.ROCKETMQ,
    ) -> None:
        self.addr = addr
        self._transport: asyncio.Transport | None = None
        self._on_request = on_request
        # the header our requests carry: ROCKETMQ (binary, as RocketMQSerializable writes it), which
        # every RocketMQ broker reads and which costs both ends far less to read than JSON; the broker
        # answers in the request's serialization
        self._conn = RemotingConnection(serialize_type=serialize_type)
        self.binary = serialize_type is SerializeType.ROCKETMQ
        self._futures: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._held: list[bytes] = []  # frames written at the end of this loop turn (or at the cap)
        self._held_bytes = 0
        self._held_split = False  # _held has a frame's head and body as two entries (written unjoined)
        # (deadline, opaque, code) of requests in send order, one queue per timeout; see _track_deadline
        self._deadlines: dict[float, collections.deque[tuple[float, int, int]]] = {}
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._sweep_at: float | None = None
        self._loop = asyncio.get_running_loop()
        self.answered = False  # a response arrived: the peer behind this socket really serves
        self._heard_at = self._loop.time()  # when bytes last arrived (or the connection opened)
        self._lost: asyncio.Future[None] = self._loop.create_future()  # set by connection_lost
        self._paused = False  # the transport's buffer is above its high-water mark
        self._drained: asyncio.Future[None] | None = None  # a writer waiting for resume_writing
        self._read = memoryview(bytearray(_READ_BYTES))  # where ordinary reads land (then copied)
        self._frame: bytearray | None = None  # a large frame being read into its own buffer
        self._frame_view: memoryview | None = None  # its first _frame_size bytes
        self._frame_size = 0
        self._frame_filled = 0
        self._kept: bytearray | None = None  # the last large frame's buffer, for the next one

    @classmethod
    async def open(
        cls, addr: str, *, on_request: RequestHandler | None = None, timeout_s: float = 3.0
    ) -> RemotingChannel:
        host, port = split_addr(addr)
        channel = cls(addr, on_request)
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(loop.create_connection(lambda: channel, host, port), timeout_s)
        except (OSError, TimeoutError) as exc:
            raise errors.ConnectionError_(f"cannot connect to {addr}: {exc}") from None
        return channel

    # ---- asyncio.Protocol ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a stream transport (uvloop's is not a subclass)
        self._heard_at = self._loop.time()

    def get_buffer(self, sizehint: int) -> memoryview:
        view = self._frame_view
        if view is not None:
            return view[self._frame_filled :]
        return self._read

    def buffer_updated(self, nbytes: int) -> None:
        self._heard_at = self._loop.time()
        conn = self._conn
        try:
            if self._frame_view is not None:
                self._frame_filled += nbytes
                frame = self._frame
                if frame is None or self._frame_filled < self._frame_size:
                    return
                self._frame = self._frame_view = None
                self._frame_filled = 0
                if not self._on_event(conn.receive_frame(frame, self._frame_size)):
                    self._fail("closed by the peer")
                return
            # as bytes (one copy out of the reused read buffer): the connection holds it, or joins it
            # to a short undecoded rest, and decodes its frames by slicing (frame's bytes path)
            conn.receive_data(bytes(self._read[:nbytes]))
            if not self._drain_events():
                self._fail("closed by the peer")
                return
            size = conn.partial_frame_bytes()
            if size >= _OWN_BUFFER_BYTES:
                frame = self._kept
                if frame is None or len(frame) < size:
                    frame = bytearray(size)
                    self._kept = frame if size <= _OWN_BUFFER_KEPT_MAX else self._kept
                self._frame_filled = conn.take_partial_frame(frame)
                self._frame, self._frame_size, self._frame_view = frame, size, memoryview(frame)[:size]
        except errors.ProtocolError as exc:
            self._fail(f"{type(exc).__name__}: {exc}")

    def eof_received(self) -> bool:
        if self._frame is not None:
            self._fail(
                f"closed by the peer inside a frame ({self._frame_filled} of {self._frame_size} bytes)"
            )
            return False
        try:
            self._conn.receive_data(b"")
            self._drain_events()
        except errors.ProtocolError as exc:
            self._fail(f"{type(exc).__name__}: {exc}")
        self._fail("closed by the peer")
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail("closed by the peer" if exc is None else f"{type(exc).__name__}: {exc}")
        self._paused = False
        self._wake_writer()
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writer()

    def _wake_writer(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _out(self) -> asyncio.Transport:
        transport = self._transport
        if transport is None:  # connection_made runs before open() returns
            raise errors.ConnectionError_(f"connection to {self.addr} is not open")
        return transport

    @property
    def is_open(self) -> bool:
        return not self._closed

    @property
    def in_flight(self) -> int:
        return len(self._futures)

    async def request(
        self, code: int, ext_fields: dict[str, str], body: bytes = b"", *, timeout_s: float = 3.0
    ) -> RemotingCommand:
        """Send a request and await its response (any response code; the caller interprets it)."""
        future = self.start_request(code, ext_fields, body, timeout_s=timeout_s)
        if self._out().get_write_buffer_size() > _DRAIN_ABOVE_BYTES:
            await self._write(b"")
        return await future

    async def answer(self, future: asyncio.Future[RemotingCommand]) -> RemotingCommand:
        """Await the response of a ``start_json_request`` or ``start_binary_request`` (after the socket
        buffer drained, if large)."""
        if self._out().get_write_buffer_size() > _DRAIN_ABOVE_BYTES:
            await self._write(b"")
        return await future

    def start_request(
        self, code: int, ext_fields: dict[str, str], body: bytes = b"", *, timeout_s: float = 3.0
    ) -> asyncio.Future[RemotingCommand]:
        """Send a request without waiting: the future gets the response, or ``RequestTimeout`` after
        ``timeout_s``, or ``ConnectionError_`` if the connection breaks first. The frame is written at
        once when nothing else is in flight or held, else with the others at the end of this loop turn.
        Nothing waits for the socket buffer to drain (``request`` does)."""
        if self._closed:
            raise errors.ConnectionError_(f"connection to {self.addr} is closed")
        cmd = self._conn.new_request(code, ext_fields, body)
        if len(body) >= _SPLIT_BODY_BYTES and type(body) is bytes:  # a mutable body is copied, as before
            head, body = self._conn.send_parts(cmd)
            return self._started_parts(cmd.opaque, code, head, body, timeout_s)
        return self._started(cmd.opaque, code, self._conn.send(cmd), timeout_s)

    def start_json_request(
        self, code: int, ext_json: str, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[RemotingCommand]:
        """``start_request`` with the extFields already rendered as JSON text (see
        ``RemotingConnection.send_json_request``)."""
        if self._closed:
            raise errors.ConnectionError_(f"connection to {self.addr} is closed")
        opaque, data = self._conn.send_json_request(code, ext_json, body)
        return self._started(opaque, code, data, timeout_s)

    def start_binary_request(
        self, code: int, ext: bytes, body: bytes, *, timeout_s: float
    ) -> asyncio.Future[RemotingCommand]:
        """``start_request`` with the extFields already rendered as ``frame.binary_ext`` writes them,
        on a ``binary`` channel (see ``RemotingConnection.send_binary_request``)."""
        if self._closed:
            raise errors.ConnectionError_(f"connection to {self.addr} is closed")
        opaque, data = self._conn.send_binary_request(code, ext, body)
        return self._started(opaque, code, data, timeout_s)

    def _started(
        self, opaque: int, code: int, data: bytes, timeout_s: float
    ) -> asyncio.Future[RemotingCommand]:
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        futures = self._futures
        alone = not futures and not self._held
        futures[opaque] = future
        self._track_deadline(opaque, code, timeout_s)
        if not alone:
            self._hold(data)
            return future
        try:
            self._out().write(data)
        except (OSError, RuntimeError) as exc:
            self._write_failed(exc, future)
        return future

    def _started_parts(
        self, opaque: int, code: int, head: bytes, body: bytes, timeout_s: float
    ) -> asyncio.Future[RemotingCommand]:
        """``_started`` of a frame given as its head and its (large) body: the same bytes in the same
        order, written with ``writelines`` (uvloop sends both buffers in one ``writev``, no copy)."""
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        futures = self._futures
        alone = not futures and not self._held
        futures[opaque] = future
        self._track_deadline(opaque, code, timeout_s)
        if not alone:
            self._hold_parts(head, body)
            return future
        try:
            self._out().writelines((head, body))
        except (OSError, RuntimeError) as exc:
            self._write_failed(exc, future)
        return future

    def _write_failed(self, exc: Exception, future: asyncio.Future[RemotingCommand]) -> NoReturn:
        """A request's first write failed: the channel fails (``future`` with it) and the caller gets
        ``ConnectionError_``."""
        self._fail(f"write failed: {exc}")
        future.exception()  # failed just above; raised here instead
        raise errors.ConnectionError_(f"connection to {self.addr} failed: {exc}") from None

    def _track_deadline(self, opaque: int, code: int, timeout_s: float) -> None:
        """Remember when ``opaque`` times out. Requests of one timeout expire in the order they were
        sent, so each timeout has a queue in send order and one timer serves the channel (no timer
        handle per request); answered requests leave their queue when the sweep passes them."""
        deadline = self._loop.time() + timeout_s
        queue = self._deadlines.get(timeout_s)
        if queue is None:
            queue = self._deadlines[timeout_s] = collections.deque()
        queue.append((deadline, opaque, code))
        if len(queue) > 2 * len(self._futures) + _DEADLINE_SLACK:
            # a request left unanswered holds the sweep at its deadline: drop the answered behind it
            futures = self._futures
            kept = [entry for entry in queue if entry[1] in futures]
            queue.clear()
            queue.extend(kept)
        if self._sweep_at is None or deadline < self._sweep_at:
            if self._sweep_timer is not None:
                self._sweep_timer.cancel()
            self._sweep_at = deadline
            self._sweep_timer = self._loop.call_at(deadline, self._sweep)

    def _sweep(self) -> None:
        """Fail the requests whose deadline has passed; re-arm for the earliest one still waiting."""
        self._sweep_timer = self._sweep_at = None
        now = self._loop.time()
        futures = self._futures
        earliest: float | None = None
        for timeout_s, queue in list(self._deadlines.items()):
            while queue:
                deadline, opaque, code = queue[0]
                if opaque in futures:
                    if deadline > now:
                        break
                    self._expire(opaque, code, timeout_s)
                    if deadline - timeout_s >= self._heard_at:
                        # not one byte since this request was sent: the connection is dead, not slow
                        self._fail(f"was silent for {timeout_s:.3g}s after a request")
                        return
                queue.popleft()
            if queue:
                head = queue[0][0]
                earliest = head if earliest is None or head < earliest else earliest
            else:
                del self._deadlines[timeout_s]
        if earliest is not None and not self._closed:
            self._sweep_at = earliest
            self._sweep_timer = self._loop.call_at(earliest, self._sweep)

    def _expire(self, opaque: int, code: int, timeout_s: float) -> None:
        future = self._futures.pop(opaque, None)
        if future is None:
            return
        self._conn.forget(opaque)  # also when its caller cancelled it: nothing waits for the answer
        if not future.done():
            future.set_exception(
                errors.RequestTimeout(
                    f"no answer from {self.addr} to request code {code} within {timeout_s:.3g}s"
                )
            )

    async def oneway(self, code: int, ext_fields: dict[str, str], body: bytes = b"") -> None:
        """Send a request that gets no response (written at the end of this loop turn, or with the next
        write before it; not acknowledged)."""
        self.start_oneway(code, ext_fields, body)

    def start_oneway(self, code: int, ext_fields: dict[str, str], body: bytes = b"") -> None:
        """``oneway`` without a coroutine: the frame is held for this loop turn's write."""
        if self._closed:
            raise errors.ConnectionError_(f"connection to {self.addr} is closed")
        self._hold(self._conn.send(self._conn.new_request(code, ext_fields, body, oneway=True)))

    def start_json_oneway(self, code: int, ext_json: str) -> None:
        """``start_oneway`` without a body, with the extFields already rendered as JSON text."""
        if self._closed:
            raise errors.ConnectionError_(f"connection to {self.addr} is closed")
        self._hold(self._conn.send_json_oneway(code, ext_json))

    def start_binary_oneway(self, code: int, ext: bytes) -> None:
        """``start_json_oneway`` for a ``binary`` channel (``ext`` as ``frame.binary_ext`` writes it)."""
        if self._closed:
            raise errors.ConnectionError_(f"connection to {self.addr} is closed")
        self._hold(self._conn.send_binary_oneway(code, ext))

    def _hold(self, data: bytes) -> None:
        """Queue ``data`` for the write at the end of this loop turn, or write what is held now once it
        reaches ``limits.client_write_hold_bytes_max`` (the broker starts on those while the turn goes
        on building the rest; frames stay in their order)."""
        held = self._held
        if not held:
            self._loop.call_soon(self._write_held)
        held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= _HOLD_BYTES_MAX:
            self._write_held()

    def _hold_parts(self, head: bytes, body: bytes) -> None:
        """``_hold`` of one frame as its head and body (two entries, written unjoined)."""
        held = self._held
        if not held:
            self._loop.call_soon(self._write_held)
        held.append(head)
        held.append(body)
        self._held_split = True
        self._held_bytes += len(head) + len(body)
        if self._held_bytes >= _HOLD_BYTES_MAX:
            self._write_held()

    def _write_held(self) -> None:
        if not self._held or self._closed:
            return
        held = self._held
        if self._held_split:  # a large body among them: written with the rest, not copied into one buffer
            self._held_split = False
            self._held_bytes = 0
            try:
                self._out().writelines(held)
            except (OSError, RuntimeError) as exc:
                self._fail(f"write failed: {exc}")
            finally:
                held.clear()
            return
        data = b"".join(held) if len(held) > 1 else held[0]
        held.clear()
        self._held_bytes = 0
        try:
            self._out().write(data)
        except (OSError, RuntimeError) as exc:
            self._fail(f"write failed: {exc}")

    async def respond(self, cmd: RemotingCommand) -> None:
        if not self._closed:
            await self._write(self._conn.send(cmd))

    async def _write(self, data: bytes) -> None:
        """Write ``data`` now (after the frames held before it, in the same write), then wait for
        the transport's buffer to drain if it is large."""
        if self._held:
            self._held.append(data)
            data = b"".join(self._held)
            self._held.clear()
            self._held_bytes = 0
            self._held_split = False
        try:
            transport = self._out()
            if data:
                transport.write(data)
            if transport.get_write_buffer_size() > _DRAIN_ABOVE_BYTES and self._paused and not self._closed:
                if self._drained is None:
                    self._drained = self._loop.create_future()
                await self._drained
        except (OSError, RuntimeError) as exc:
            self._fail(f"write failed: {exc}")
            raise errors.ConnectionError_(f"connection to {self.addr} failed: {exc}") from None
        if self._closed:
            raise errors.ConnectionError_(f"connection to {self.addr} is closed")

    def _drain_events(self) -> bool:
        # a matched answer comes as its command (no Response object) and completes its future here
        next_command = self._conn.next_command
        while True:
            event = next_command()
            if isinstance(event, RemotingCommand):
                if event.flag & RPC_TYPE:
                    self.answered = True
                    future = self._futures.pop(event.opaque, None)
                    if future is not None and not future.done():
                        future.set_result(event)
                else:
                    self._dispatch(event)
                continue
            if event is NEED_DATA:
                return True
            if not self._on_event(event):
                return False

    def _on_event(self, event: Event) -> bool:
        """Act on one event; False when the connection closed."""
        if isinstance(event, Response):
            self.answered = True
            future = self._futures.pop(event.command.opaque, None)
            if future is not None and not future.done():
                future.set_result(event.command)
        elif isinstance(event, RemotingCommand):
            self._dispatch(event)
        elif isinstance(event, ConnectionClosed):
            return False
        elif isinstance(event, UnmatchedResponse):
            log.debug("late answer from %s for opaque %d", self.addr, event.command.opaque)
        return True

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if self._on_request is None:
            return
        task = asyncio.get_running_loop().create_task(self._serve(cmd))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, cmd: RemotingCommand) -> None:
        assert self._on_request is not None
        try:
            answer = await self._on_request(self, cmd)
            if answer is not None and not cmd.is_oneway:
                await self.respond(answer)
        except Exception:
            log.exception("handling request code %d from %s failed", cmd.code, self.addr)

    def _fail(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        log.debug("connection to %s: %s", self.addr, reason)
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = self._sweep_at = None
        self._deadlines.clear()
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(errors.ConnectionError_(f"connection to {self.addr} {reason}"))
        if self._transport is not None:
            self._transport.close()

    async def close(self) -> None:
        """Close; held oneway frames are written first, pending requests fail with ``ConnectionError_``."""
        self._write_held()
        self._fail("closed locally")
        if self._transport is not None:
            await asyncio.shield(self._lost)  # the transport has flushed and closed its socket


class ChannelPool:
    """One channel per address, reopened when broken; ``on_connect`` runs after each (re)connect."""

    def __init__(
        self,
        *,
        on_request: RequestHandler | None = None,
        on_connect: ConnectHook | None = None,
        backoff: Backoff | None = None,
        connect_timeout_s: float = 3.0,
    ) -> None:
        self._on_request = on_request
        self._on_connect = on_connect
        self._backoff = backoff or Backoff(initial_s=0.05, max_s=2.0)
        self._connect_timeout_s = connect_timeout_s
        self._channels: dict[str, RemotingChannel] = {}
        self._failures: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._rng = random.Random()
        self._closed = False

    def channels(self) -> list[RemotingChannel]:
        return [c for c in self._channels.values() if c.is_open]

    def open_channel(self, addr: str) -> RemotingChannel | None:
        """The open channel to ``addr``, or None (then ``get`` connects)."""
        channel = self._channels.get(addr)
        return channel if channel is not None and channel.is_open else None

    async def get(self, addr: str) -> RemotingChannel:
        """An open channel to ``addr``, connecting (after a back-off pause if it failed before)."""
        channel = self._channels.get(addr)
        if channel is not None and channel.is_open:
            return channel
        if self._closed:
            raise errors.ClientClosed("the client is closed")
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            channel = self._channels.get(addr)
            if channel is not None and channel.is_open:
                return channel
            return await self._connect(addr)

    async def _connect(self, addr: str) -> RemotingChannel:
        # A TCP connect that succeeds proves little: a proxy or load balancer in front of a dead broker
        # accepts and then resets. Only a channel that answered once clears the failure count; one that
        # died before answering counts as a failure, so reconnects back off instead of spinning.
        previous = self._channels.pop(addr, None)
        if previous is not None:
            if previous.answered:
                self._failures.pop(addr, None)
            else:
                self._failures[addr] = self._failures.get(addr, 0) + 1
        failures = self._failures.get(addr, 0)
        if failures:
            await asyncio.sleep(self._backoff.delay_s(failures - 1, self._rng))
        try:
            channel = await RemotingChannel.open(
                addr, on_request=self._on_request, timeout_s=self._connect_timeout_s
            )
        except errors.ConnectionError_:
            self._failures[addr] = failures + 1
            raise
        self._channels[addr] = channel
        if self._on_connect is not None:
            try:
                await self._on_connect(channel)
            except errors.TxmqError as exc:
                log.warning("registration on new connection to %s failed: %s", addr, exc)
        return channel

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
