"""The permissive gRPC front relays bytes unchanged and in order both ways, whatever the chunking and
timing, on its C pump (``server/_relaypump.c``, joined connections off the loop) and on its asyncio
relay (the reference): real sockets, a backend that speaks first (as grpc sends its SETTINGS at once,
before the front has joined the two sides), a client that may send more before the join, bytes the loop
read from both sides before the hand-over to the pump (deterministically, on socket pairs), a half-close
each way with data still flowing the other way, and an 8 MB flood through a slow reader."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txmq.server.grpc_front import PUMP, GrpcFront, _Relay, hand_over

PUMPS = [
    pytest.param(False, id="asyncio-relay"),
    pytest.param(
        True, id="c-pump", marks=pytest.mark.skipif(PUMP is None, reason="txmq.server._relaypump not built")
    ),
]
LOOPS = ["asyncio"] + (["uvloop"] if importlib.util.find_spec("uvloop") is not None else [])

# one step of a side's script: bytes to send, and whether to yield to the loop (and drain) after them
_steps = st.lists(st.tuples(st.binary(min_size=1, max_size=70_000), st.booleans()), max_size=6)


class _Backend:
    """Sends ``greeting`` on connect, then ``down`` (as its steps say) while it reads the client to the
    end, then ``tail`` after the client's end (a half-closed connection still answers), then its end."""

    def __init__(self, greeting: bytes, down: list[tuple[bytes, bool]], tail: bytes) -> None:
        self.greeting, self.down, self.tail = greeting, down, tail
        self.received = bytearray()
        self.finished = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.greeting:
                writer.write(self.greeting)
            read = asyncio.ensure_future(self._read(reader))
            await _play(writer, self.down)
            await read
            writer.write(self.tail)
            writer.write_eof()
            await writer.drain()
        finally:
            writer.close()
            self.finished.set()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(65536):
            self.received += data


async def _play(writer: asyncio.StreamWriter, steps: list[tuple[bytes, bool]]) -> None:
    for data, pause in steps:
        writer.write(data)
        if pause:
            await writer.drain()
            await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def _front(
    backend: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]],
    pump: bool,
    unix_path: str | None,
) -> AsyncIterator[GrpcFront]:
    if unix_path is not None:
        server = await asyncio.start_unix_server(backend, unix_path)
        where: int | str = unix_path
    else:
        server = await asyncio.start_server(backend, "127.0.0.1", 0)
        where = server.sockets[0].getsockname()[1]
    front = await GrpcFront.bind("127.0.0.1", 0, pump=pump)
    await front.route(where, where)
    try:
        yield front
    finally:
        await front.close()
        front.close_relays()
        server.close()
        await server.wait_closed()


async def _relay_once(
    pump: bool,
    unix_path: str | None,
    greeting: bytes,
    first: bytes,
    up: list[tuple[bytes, bool]],
    down: list[tuple[bytes, bool]],
    tail: bytes,
) -> None:
    backend = _Backend(greeting, down, tail)
    async with _front(backend.serve, pump, unix_path) as front:
        reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
        try:
            received = bytearray()

            async def read_all() -> None:
                while data := await reader.read(65536):
                    received.extend(data)

            read = asyncio.ensure_future(read_all())
            writer.write(first)  # no pause: what follows may reach the front before its join
            await _play(writer, up)
            writer.write_eof()
            await asyncio.wait_for(read, 60)
            await asyncio.wait_for(backend.finished.wait(), 60)
            assert bytes(backend.received) == first + b"".join(data for data, _ in up)
            assert bytes(received) == greeting + b"".join(data for data, _ in down) + tail
            # pumped unless the client's end reached the front before the join (then the asyncio relay)
            pumped = [side.pump for side in front._accepted if side.pump is not None]
            assert len(pumped) <= (1 if pump else 0)
            for _ in range(3000):
                if not front.accepted:
                    break
                await asyncio.sleep(0.01)
            assert not front.accepted  # both ends seen: the front let the connection go
        finally:
            writer.close()


def _run(loop_name: str, main: Coroutine[Any, Any, None]) -> None:
    if loop_name == "uvloop":
        import uvloop

        uvloop.run(main)
    else:
        asyncio.run(main)


@pytest.mark.parametrize("pump", PUMPS)
@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("unix", [False, True], ids=["tcp-backend", "unix-backend"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    greeting=st.binary(max_size=2000),
    first=st.binary(min_size=1, max_size=3000),
    up=_steps,
    down=_steps,
    tail=st.binary(max_size=5000),
)
def test_bytes_pass_unchanged_and_in_order_both_ways(
    tmp_path: Path,
    pump: bool,
    loop_name: str,
    unix: bool,
    greeting: bytes,
    first: bytes,
    up: list[tuple[bytes, bool]],
    down: list[tuple[bytes, bool]],
    tail: bytes,
) -> None:
    unix_path = str(tmp_path / "backend.sock") if unix else None
    if unix_path is not None:
        Path(unix_path).unlink(missing_ok=True)
    _run(loop_name, _relay_once(pump, unix_path, greeting, first, up, down, tail))


@pytest.mark.skipif(PUMP is None, reason="txmq.server._relaypump not built")
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_joined_connection_is_pumped_and_let_go_when_both_ends_are_seen(loop_name: str) -> None:
    async def main() -> None:
        backend = _Backend(b"settings", [(b"answer", True)], b"after your end")
        async with _front(backend.serve, True, None) as front:
            reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
            writer.write(b"PRI * HTTP/2.0")
            assert await asyncio.wait_for(reader.readexactly(14), 30) == b"settingsanswer"
            (side,) = front.accepted
            assert side.pump is not None and not side.pump.done and side.transport is None
            writer.write(b"more")
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 30) == b"after your end"
            assert bytes(backend.received) == b"PRI * HTTP/2.0more"
            for _ in range(3000):
                if side.pump.done:
                    break
                await asyncio.sleep(0.01)
            assert side.pump.done and side.pump.relayed == (18, 28) and not front.accepted
            writer.close()

    _run(loop_name, main())


@pytest.mark.skipif(PUMP is None, reason="txmq.server._relaypump not built")
def test_close_relays_ends_a_pumped_connection() -> None:
    async def main() -> None:
        backend = _Backend(b"settings", [], b"")
        async with _front(backend.serve, True, None) as front:
            reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
            writer.write(b"PRI * HTTP/2.0")
            assert await asyncio.wait_for(reader.readexactly(8), 30) == b"settings"
            front.close_relays()
            assert await asyncio.wait_for(reader.read(), 30) == b""  # the client sees the end
            await asyncio.wait_for(backend.finished.wait(), 30)  # so does the backend
            writer.close()

    asyncio.run(main())


@pytest.mark.parametrize("pump", PUMPS)
@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_flood_through_a_slow_reader_arrives_whole(pump: bool, loop_name: str) -> None:
    """8 MB each way while each side reads slowly: back-pressure, not loss or reordering."""
    size = 8 * 1024 * 1024
    up = bytes(i * 7 % 251 for i in range(size))
    down = bytes(i * 13 % 241 for i in range(size))

    async def slow_read(reader: asyncio.StreamReader, into: bytearray) -> None:
        while data := await reader.read(1 << 20):
            into += data
            if len(into) < size // 2:
                await asyncio.sleep(0.001)

    async def main() -> None:
        got_up = bytearray()
        done = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            read = asyncio.ensure_future(slow_read(reader, got_up))
            writer.write(down)
            writer.write_eof()
            await writer.drain()
            await read
            writer.close()
            done.set()

        async with _front(serve, pump, None) as front:
            reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
            got_down = bytearray()
            read = asyncio.ensure_future(slow_read(reader, got_down))
            writer.write(up)
            writer.write_eof()
            await writer.drain()
            await asyncio.wait_for(read, 120)
            await asyncio.wait_for(done.wait(), 120)
            writer.close()
            assert got_up == up and got_down == down

    _run(loop_name, main())


async def _hand_over_once(
    early_in: list[bytes], early_out: list[bytes], later_in: list[bytes], later_out: list[bytes]
) -> None:
    """Both sides have sent bytes the loop read before the join (``_early``); the pump must write those
    first, then what follows, each way, and pass both ends on."""
    loop = asyncio.get_running_loop()
    client_end, client_front = socket.socketpair()
    backend_front, backend_end = socket.socketpair()
    _, client = await loop.connect_accepted_socket(_Relay, client_front)
    _, upstream = await loop.connect_accepted_socket(_Relay, backend_front)
    for data in early_in:
        client_end.sendall(data)
    for data in early_out:
        backend_end.sendall(data)
    for _ in range(3000):  # until the loop has read them all
        if client._early_bytes == sum(map(len, early_in)) and upstream._early_bytes == sum(
            map(len, early_out)
        ):
            break
        await asyncio.sleep(0.01)
    assert PUMP is not None
    handed, pump = hand_over(PUMP, client, upstream)
    assert handed and pump is not None

    def play(end: socket.socket, chunks: list[bytes], into: bytearray) -> None:
        def write() -> None:
            for data in chunks:
                end.sendall(data)
            end.shutdown(socket.SHUT_WR)

        writer = threading.Thread(target=write)
        writer.start()
        while data := end.recv(65536):
            into += data
        writer.join()

    got_in, got_out = bytearray(), bytearray()
    client_end.settimeout(60)
    backend_end.settimeout(60)
    await asyncio.gather(
        asyncio.to_thread(play, client_end, later_in, got_out),
        asyncio.to_thread(play, backend_end, later_out, got_in),
    )
    client_end.close()
    backend_end.close()
    assert bytes(got_in) == b"".join(early_in + later_in)
    assert bytes(got_out) == b"".join(early_out + later_out)
    for _ in range(3000):
        if pump.done:
            break
        await asyncio.sleep(0.01)
    assert pump.done and pump.relayed == (len(got_in), len(got_out))


_chunks = st.lists(st.binary(min_size=1, max_size=40_000), max_size=5)


@pytest.mark.skipif(PUMP is None, reason="txmq.server._relaypump not built")
@pytest.mark.parametrize("loop_name", LOOPS)
@settings(max_examples=40, deadline=None)
@given(early_in=_chunks, early_out=_chunks, later_in=_chunks, later_out=_chunks)
def test_the_hand_over_writes_what_the_loop_read_first(
    loop_name: str,
    early_in: list[bytes],
    early_out: list[bytes],
    later_in: list[bytes],
    later_out: list[bytes],
) -> None:
    _run(loop_name, _hand_over_once(early_in, early_out, later_in, later_out))


@pytest.mark.skipif(PUMP is None, reason="txmq.server._relaypump not built")
def test_a_direction_already_at_its_end_does_not_cut_the_other() -> None:
    """One source has ended before the pump starts (its direction ends at once): the other direction
    still delivers its early bytes and everything after, and only then are both sockets closed."""
    assert PUMP is not None
    for round_ in range(200):
        client_end, client_front = socket.socketpair()
        backend_front, backend_end = socket.socketpair()
        client_end.shutdown(socket.SHUT_WR)  # the client has said all it will
        early = bytes([round_ % 256]) * 3000
        pump = PUMP.start(client_front.fileno(), backend_front.fileno(), b"", early)
        client_front.close()
        backend_front.close()
        backend_end.settimeout(30)
        assert backend_end.recv(10) == b""  # the client's end passed on
        backend_end.sendall(b"later")
        backend_end.shutdown(socket.SHUT_WR)
        client_end.settimeout(30)
        got = bytearray()
        while data := client_end.recv(65536):
            got += data
        assert bytes(got) == early + b"later"
        client_end.close()
        backend_end.close()
        for _ in range(3000):
            if pump.done:
                break
            time.sleep(0.01)
        assert pump.done and pump.error == 0 and pump.relayed == (0, len(early) + 5)
