"""The permissive gRPC front's bounds, on real loopback sockets: connections beyond the cap are closed on
accept, a connection that never speaks is closed, and a client that floods before its backend is
joined is paused, not buffered without end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from txmq.common import limits
from txmq.server.grpc_front import _WRITE_HIGH, GrpcFront, _Relay


async def _echo_backend(unix_path: str | None = None) -> tuple[asyncio.Server, int | str]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    if unix_path is not None:
        return await asyncio.start_unix_server(echo, unix_path), unix_path
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


class _Clients:
    """Client connections to a front, all closed (and awaited) at the end."""

    def __init__(self, front: GrpcFront) -> None:
        self.front = front
        self.writers: list[asyncio.StreamWriter] = []

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.front.port)
        self.writers.append(writer)
        return reader, writer

    async def round_trip(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await self.connect()
        writer.write(b"PRI * HTTP/2.0")
        assert await asyncio.wait_for(reader.readexactly(14), 30) == b"PRI * HTTP/2.0"
        return reader, writer

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


@contextlib.asynccontextmanager
async def _front(connections_max: int, unix_path: str | None = None) -> AsyncIterator[_Clients]:
    backend, port = await _echo_backend(unix_path)
    front = await GrpcFront.bind("127.0.0.1", 0, connections_max=connections_max)
    await front.route(port, port)
    clients = _Clients(front)
    try:
        yield clients
    finally:
        await clients.close()
        await front.close()
        backend.close()
        await backend.wait_closed()


async def test_the_front_relays_to_a_unix_socket_backend(tmp_path: Path) -> None:
    """The broker's permissive backends listen on Unix sockets: a route given paths relays there."""
    async with _front(connections_max=4, unix_path=str(tmp_path / "backend.sock")) as clients:
        reader, writer = await clients.round_trip()
        writer.write(b"more")
        assert await asyncio.wait_for(reader.readexactly(4), 30) == b"more"


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(3000):  # the front sees a close on its next loop turns; give up after 30 s
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 30 s")


async def test_connections_beyond_the_cap_are_closed_and_room_is_made_when_one_leaves() -> None:
    async with _front(connections_max=2) as clients:
        _, first = await clients.round_trip()
        await clients.round_trip()
        reader, writer = await clients.connect()
        writer.write(b"PRI")
        assert await asyncio.wait_for(reader.read(), 30) == b""  # closed without an answer
        assert clients.front.refused == 1 and len(clients.front.accepted) == 2
        first.close()  # both directions end, so the front lets the connection go
        await _until(lambda: len(clients.front.accepted) < 2)
        await clients.round_trip()


async def test_a_connection_that_sends_nothing_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "grpc_front_first_bytes_s", 0.2)
    async with _front(connections_max=10) as clients:
        silent, _ = await clients.connect()
        assert await asyncio.wait_for(silent.read(), 30) == b""
        await _until(lambda: not clients.front.accepted)
        answers, speaking = await clients.round_trip()  # one that speaks at once is not cut
        await asyncio.sleep(0.5)  # past the silence limit
        speaking.write(b"later")
        assert await asyncio.wait_for(answers.readexactly(5), 30) == b"later"


class _Pausable:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass


def test_a_client_flooding_before_the_join_is_paused_and_resumed_after() -> None:
    client, client_transport = _Relay(), _Pausable()
    client.connection_made(client_transport)  # type: ignore[arg-type]
    chunk = b"x" * 65536
    for _ in range(_WRITE_HIGH // len(chunk)):
        client.data_received(chunk)
    assert not client_transport.paused
    client.data_received(b"one more")
    assert client_transport.paused
    backend, backend_transport = _Relay(), _Pausable()
    backend.connection_made(backend_transport)  # type: ignore[arg-type]
    client.join(backend)
    assert b"".join(backend_transport.written) == chunk * (_WRITE_HIGH // len(chunk)) + b"one more"
    assert not client_transport.paused
