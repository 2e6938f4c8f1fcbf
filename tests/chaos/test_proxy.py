"""The fault proxy: a pure, seeded schedule and an I/O shell that does what each plan says."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from txmq.testing.proxy import QUIET, ConnectionPlan, Fault, FaultProxy, FaultRates, FaultSchedule


def test_the_schedule_is_a_function_of_seed_and_index() -> None:
    a, b = FaultSchedule(7), FaultSchedule(7)
    assert [a.plan(i) for i in range(200)] == [b.plan(i) for i in range(200)]
    assert [a.plan(i) for i in range(200)] != [FaultSchedule(8).plan(i) for i in range(200)]
    kinds = Counter(FaultSchedule(1).plan(i).fault for i in range(2000))
    assert set(kinds) == set(Fault)
    assert all(FaultSchedule(3, QUIET).plan(i) == ConnectionPlan() for i in range(100))
    with pytest.raises(ValueError, match="at most 1"):
        FaultSchedule(1, FaultRates(delay=0.6, reset=0.6))


class _Always(FaultSchedule):
    """One plan for every connection (the per-fault behaviour under test)."""

    def __init__(self, plan: ConnectionPlan) -> None:
        super().__init__(0)
        self.fixed = plan

    def plan(self, index: int) -> ConnectionPlan:
        return self.fixed


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    yield int(server.sockets[0].getsockname()[1])
    server.close()


async def _through(
    echo_port: int, plan: ConnectionPlan, payload: bytes, wait_s: float = 3.0
) -> tuple[bytes, FaultProxy]:
    proxy = FaultProxy(("127.0.0.1", echo_port), _Always(plan))
    await proxy.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(payload)
        got = b""
        try:
            while len(got) < len(payload):
                chunk = await asyncio.wait_for(reader.read(65536), wait_s)
                if not chunk:
                    break
                got += chunk
        except (TimeoutError, ConnectionError):
            pass
        writer.close()
        return got, proxy
    finally:
        await proxy.close()


@pytest.mark.parametrize(
    "plan",
    [
        ConnectionPlan(),
        ConnectionPlan(Fault.DELAY, delay_ms=5),
        ConnectionPlan(Fault.STALL, after_bytes=10, stall_ms=50),
    ],
)
async def test_passing_plans_deliver_every_byte_in_order(echo: int, plan: ConnectionPlan) -> None:
    payload = bytes(range(256)) * 100
    got, proxy = await _through(echo, plan, payload)
    assert got == payload
    assert proxy.figures.connections == 1


async def test_reset_cuts_the_stream_after_the_planned_bytes(echo: int) -> None:
    got, proxy = await _through(echo, ConnectionPlan(Fault.RESET, after_bytes=0), b"x" * 100_000)
    assert len(got) < 100_000
    assert proxy.figures.faults == {"reset": 1}


async def test_a_blackhole_swallows_everything(echo: int) -> None:
    got, proxy = await _through(echo, ConnectionPlan(Fault.BLACKHOLE, after_bytes=0), b"hello", 0.3)
    assert got == b""
    assert proxy.figures.faults == {"blackhole": 1}
