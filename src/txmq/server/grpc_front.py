"""One public gRPC port for TLS and plaintext clients alike (the Apache proxy's "permissive" TLS mode).

grpc serves one kind of connection per port. In permissive mode the broker's gRPC server listens on two
local backends, a plaintext one and a TLS one (Unix sockets in the abstract namespace: a relayed byte
costs the kernel about half of a loopback TCP hop; loopback ports work too), and this front accepts on
the public port. It waits for
the client's first bytes, picks the backend from them (``backend_for``: a TLS handshake record starts
with 0x16, an HTTP/2 connection preface with ``PRI``), connects to it and then relays bytes both ways
unchanged, with back-pressure: a side whose write buffer fills pauses reading on the other. TLS itself
is grpc's (in C); the front never decrypts anything.

Bounds: at most ``connections_max`` client connections at once (more are closed on accept, as grpc
would refuse nothing itself); a connection that sends nothing within ``limits.grpc_front_first_bytes_s``
is closed (every HTTP/2 or TLS client speaks first); and what a client sends before its backend is
connected is held up to ``_WRITE_HIGH`` bytes, then its reading pauses until the join.

Once joined, a connection leaves the event loop when the C extension ``server/_relaypump.c`` is built:
both transports stop reading, the pump takes its own copies of the two descriptors with what each side
sent before the join (read by the loop, written nowhere yet: nothing is written to either side before
the join), the transports are closed, and two threads relay the bytes without the GIL (blocking
writes: back-pressure; an end passes through as a ``shutdown(SHUT_WR)``). A pumped connection counts
against ``connections_max`` until both its directions end. Without the extension (``TXMQ_PURE=1``, no
compiler) or for a side that already ended before the join, the asyncio relay below carries the bytes:
it is the reference the pump is held to (``tests/property/test_grpc_front_relay.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import importlib
import logging
import socket
from types import ModuleType
from typing import TYPE_CHECKING, Final, cast

from txmq.common import limits

if TYPE_CHECKING:
    from txmq.server._relaypump import Pump

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD: Final = 0x16  # the first byte of every TLS ClientHello record
BACKEND_HOST: Final = "127.0.0.1"
_WRITE_HIGH: Final = 1024 * 1024  # a side's write buffer beyond which the other side stops being read
_WRITE_LOW: Final = 256 * 1024


def _load_pump() -> ModuleType | None:
    """The C relay of joined connections (``server/_relaypump.c``) or None: not built, or ``TXMQ_PURE=1``."""
    try:
        return importlib.import_module("txmq.server._relaypump")
    except ImportError:
        return None


PUMP: Final = _load_pump()


class Backend(enum.Enum):
    PLAINTEXT = "plaintext"
    TLS = "tls"


def backend_for(first: bytes) -> Backend:
    """Which backend a connection whose first bytes are ``first`` (at least one) belongs to."""
    return Backend.TLS if first[0] == TLS_HANDSHAKE_RECORD else Backend.PLAINTEXT


class _Relay(asyncio.Protocol):
    """One side of a relayed connection; ``peer`` is the other side once both are connected."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Relay | None = None
        self.eof = False
        # what arrived before the other side was joined (a grpc server sends its SETTINGS frame as
        # soon as it accepts, possibly before ``create_connection`` has returned to the front)
        self._early: list[bytes] = []
        self._early_bytes = 0
        self._held = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        self.transport.set_write_buffer_limits(high=_WRITE_HIGH, low=_WRITE_LOW)

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None:
            self._early.append(data)
            self._early_bytes += len(data)
            if self._early_bytes > _WRITE_HIGH and self.transport is not None and not self._held:
                self._held = True  # hold no more until the other side is joined
                self.transport.pause_reading()
        elif peer.transport is not None:
            peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer
        if peer is not None and peer.transport is not None and peer.transport.can_write_eof():
            peer.transport.write_eof()
        self._close_if_done()
        return True  # keep the other direction open (a half-closed connection may still answer)

    def _close_if_done(self) -> None:
        """Both directions ended: close both sides (a transport kept open after its end is never closed
        by asyncio, so without this every relayed connection would stay open forever)."""
        peer = self.peer
        if peer is not None and peer.peer is self and self.eof and peer.eof:
            for side in (self, peer):
                if side.transport is not None:
                    side.transport.close()  # after what is buffered has been written

    def join(self, peer: _Relay) -> None:
        """Relay to ``peer`` from now on, starting with what arrived before (and an end seen then)."""
        self.peer = peer
        early, self._early, self._early_bytes = self._early, [], 0
        if peer.transport is None:
            return
        if early:
            peer.transport.write(b"".join(early))
        if self._held and self.transport is not None:
            self._held = False
            self.transport.resume_reading()
        if self.eof and peer.transport.can_write_eof():
            peer.transport.write_eof()
        self._close_if_done()
        if self.transport is None:  # this side is already gone: so is the relayed connection
            peer.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        peer = self.peer
        self.transport = None
        if peer is not None and peer.transport is not None:
            peer.transport.close()  # after what is buffered has been written

    def pause_writing(self) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.pause_reading()

    def resume_writing(self) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.resume_reading()


class _Accepted(_Relay):
    """The client's side: holds its first bytes until the backend they chose is connected."""

    def __init__(self, front: GrpcFront) -> None:
        super().__init__()
        self._front = front
        self._task: asyncio.Task[None] | None = None
        self._silence: asyncio.TimerHandle | None = None
        self.pump: Pump | None = None  # the C relay carrying this connection once it is handed over

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        front = self._front
        if len(front._accepted) >= front.connections_max:
            front.forget_pumped()
        if len(front._accepted) >= front.connections_max:
            front.refused += 1
            if front.refused == 1 or front.refused % 1000 == 0:
                log.warning(
                    "gRPC front: %d connections open, the most allowed; refused %d so far",
                    len(front._accepted),
                    front.refused,
                )
            cast(asyncio.Transport, transport).abort()
            return
        front._accepted.add(self)
        self._silence = asyncio.get_running_loop().call_later(limits.grpc_front_first_bytes_s, self._silent)

    def _silent(self) -> None:
        if self.transport is not None:
            log.info("gRPC front: closed a connection silent for %s s", limits.grpc_front_first_bytes_s)
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.pump is None:  # a pumped connection stays counted until the pump is done
            self._front._accepted.discard(self)
        if self._silence is not None:
            self._silence.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._task is None and data:
            if self._silence is not None:
                self._silence.cancel()
                self._silence = None
            self._task = asyncio.get_running_loop().create_task(self._connect(backend_for(data)))
            self._front.connecting.add(self._task)
            self._task.add_done_callback(self._front.connecting.discard)

    async def _connect(self, backend: Backend) -> None:
        loop = asyncio.get_running_loop()
        where = self._front.port_of(backend)
        try:
            if isinstance(where, str):  # a Unix socket (the broker's backends): half the kernel work
                _, upstream = await loop.create_unix_connection(_Relay, sock=await _unix_socket(where))
            else:
                _, upstream = await loop.create_connection(_Relay, BACKEND_HOST, where)
        except OSError as exc:
            log.warning("gRPC front: cannot reach the %s backend: %s", backend.value, exc)
            if self.transport is not None:
                self.transport.close()
            return
        if self.transport is None:  # the client left while we connected
            if upstream.transport is not None:
                upstream.transport.close()
            return
        if self._front.pump is not None:
            handed, self.pump = hand_over(self._front.pump, self, upstream)
            if handed:
                return
        upstream.join(self)
        self.join(upstream)


def hand_over(pump: ModuleType, client: _Relay, upstream: _Relay) -> tuple[bool, Pump | None]:
    """Give a joined connection to the C pump: (False, None) when nothing was done (a side has already
    ended, or has no descriptor: the asyncio relay joins them); else (True, the pump), or (True, None)
    when it could not start (the connection is closed then, as on any relay error)."""
    mine, theirs = client.transport, upstream.transport
    if mine is None or theirs is None or client.eof or upstream.eof:
        return False, None
    mine_fd, theirs_fd = _fileno(mine), _fileno(theirs)
    if mine_fd < 0 or theirs_fd < 0:
        return False, None
    # The loop reads neither side from here on, so what it has read is exactly ``_early`` (each read
    # reaches ``data_received`` at once), and it has written nothing to either side yet.
    mine.pause_reading()
    theirs.pause_reading()
    early_in, early_out = b"".join(client._early), b"".join(upstream._early)
    client._early, client._early_bytes, upstream._early, upstream._early_bytes = [], 0, [], 0
    started: Pump | None = None
    try:
        started = pump.start(mine_fd, theirs_fd, early_in, early_out)
    except OSError as exc:  # no thread to be had
        log.warning("gRPC front: cannot start a relay: %s", exc)
    mine.abort()  # closes the loop's descriptors; the pump relays through its own copies
    theirs.abort()
    return True, started


def _fileno(transport: asyncio.Transport) -> int:
    sock = transport.get_extra_info("socket")
    return -1 if sock is None else int(sock.fileno())


async def _unix_socket(address: str) -> socket.socket:
    """A connected Unix socket; ``address`` a path or, NUL first, an abstract name (uvloop's
    ``create_unix_connection`` takes only paths, so the socket is connected here)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


class GrpcFront:
    """The public listener of a permissive gRPC port. ``bind`` first (so a taken port fails before the
    backends start), then ``route`` to the backends' ports, then ``close`` at shutdown."""

    def __init__(self, server: asyncio.Server, connections_max: int, pump: ModuleType | None) -> None:
        self._server = server
        self._ports: dict[Backend, int | str] = {}
        self.connecting: set[asyncio.Task[None]] = set()
        self.connections_max = connections_max
        self.pump = pump  # the C relay module, or None: the asyncio relay carries joined connections
        self._accepted: set[_Accepted] = set()  # client connections open now (some perhaps just ended)
        self.refused = 0  # connections closed on accept because ``connections_max`` were open

    @classmethod
    async def bind(
        cls, host: str, port: int, *, connections_max: int = limits.connections_max, pump: bool = True
    ) -> GrpcFront:
        """``pump=False``: joined connections stay on the asyncio relay even when the C pump is built."""
        loop = asyncio.get_running_loop()
        front: GrpcFront | None = None

        def accepted() -> _Accepted:
            assert front is not None
            return _Accepted(front)

        server = await loop.create_server(accepted, host, port, reuse_address=True, start_serving=False)
        front = cls(server, connections_max, PUMP if pump else None)
        return front

    @property
    def accepted(self) -> set[_Accepted]:
        """The client connections open now."""
        self.forget_pumped()
        return self._accepted

    def forget_pumped(self) -> None:
        """Stop counting the pumped connections whose pump is done."""
        done = [side for side in self._accepted if side.pump is not None and side.pump.done]
        self._accepted.difference_update(done)

    def close_relays(self) -> None:
        """Shut down every pumped connection (at shutdown, after the backends' graceful stop; the asyncio
        relay's connections end with the backends' or the loop's)."""
        for side in self._accepted:
            if side.pump is not None:
                side.pump.close()

    @property
    def port(self) -> int:
        sock: socket.socket = self._server.sockets[0]
        return int(sock.getsockname()[1])

    def port_of(self, backend: Backend) -> int | str:
        return self._ports[backend]

    async def route(self, plaintext_port: int | str, tls_port: int | str) -> None:
        """Start accepting, relaying to these loopback ports (an ``int``) or Unix socket addresses (a
        ``str``: a path, or NUL first an abstract name)."""
        self._ports = {Backend.PLAINTEXT: plaintext_port, Backend.TLS: tls_port}
        await self._server.start_serving()

    async def close(self) -> None:
        self._server.close()
        for task in list(self.connecting):
            task.cancel()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()
