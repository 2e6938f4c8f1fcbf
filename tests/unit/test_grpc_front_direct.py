"""The permissive front once both sides are joined: each side's chunks go straight to the other side's
transport (``_Relay.relay_directly``: its ``write`` as ``data_received``, no Python frame per chunk
under uvloop). The relayed bytes must be what the Python ``data_received`` relays: every byte, in
order, both ways, through back-pressure and a half-close, on uvloop (the broker's loop) and asyncio."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from txmq.server.grpc_front import GrpcFront, _Accepted

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


def _run(loop: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(main())


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Echoes everything, slowly enough that a flood fills the front's buffers; ends when the client
    ends its half."""
    try:
        while data := await reader.read(16384):
            writer.write(data)
            await writer.drain()
            await asyncio.sleep(0)
        writer.write_eof()
        await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _relayed(chunks: list[bytes], *, half_close: bool) -> tuple[bytes, bool]:
    """Sends ``chunks`` through a front to the echo backend while reading the echo; returns what came
    back and whether the accepted side relays directly."""
    backend = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = backend.sockets[0].getsockname()[1]
    front = await GrpcFront.bind("127.0.0.1", 0, connections_max=4)
    await front.route(port, port)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
        expected = sum(len(c) for c in chunks)

        async def send() -> None:
            for chunk in chunks:
                writer.write(chunk)
                await writer.drain()
            if half_close:
                writer.write_eof()

        sending = asyncio.ensure_future(send())
        got = await asyncio.wait_for(reader.read() if half_close else reader.readexactly(expected), 60)
        await sending
        accepted = next(iter(front.accepted), None)  # gone once both halves have ended
        direct = isinstance(accepted, _Accepted) and "data_received" in vars(accepted)
        writer.close()
        return got, direct
    finally:
        await front.close()
        backend.close()
        await backend.wait_closed()


@pytest.mark.parametrize("loop", sorted(LOOPS))
@pytest.mark.parametrize("seed", range(4))
def test_chunks_cross_the_joined_relay_whole_and_in_order(loop: str, seed: int) -> None:
    rng = random.Random(seed)
    chunks = [b"PRI * HTTP/2.0\r\n"] + [
        rng.randbytes(rng.choice((1, 9, 300, 1200, 16384, 70000))) for _ in range(rng.randint(1, 40))
    ]

    async def main() -> None:
        got, direct = await _relayed(chunks, half_close=False)
        assert got == b"".join(chunks)
        assert direct  # the fast path is the one exercised

    _run(loop, main)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_flood_through_back_pressure_and_a_half_close_arrives_whole(loop: str) -> None:
    """8 MB sent at once (beyond the front's write buffer limits both ways), then the client's end:
    the echo answers everything and ends its half, which the front relays back."""
    rng = random.Random(7)
    chunks = [b"PRI"] + [rng.randbytes(1 << 20) for _ in range(8)]

    async def main() -> None:
        got, _ = await _relayed(chunks, half_close=True)
        assert got == b"".join(chunks)

    _run(loop, main)
