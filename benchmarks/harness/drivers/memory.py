"""The smallest complete driver: in-process asyncio queues, no server, no durability.

It exists to check the harness itself (tests, ``--systems memory`` after registering it) and to show
a driver author the whole protocol in one screen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from benchmarks.harness.driver import Consumer, DriverInfo, Producer
from benchmarks.harness.workload import Workload

_RECEIVE_WAIT_S = 0.02


class _MemoryProducer:
    def __init__(self, queues: list[asyncio.Queue[bytes]]) -> None:
        self._queues = queues

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        await asyncio.sleep(0)  # one scheduling round trip stands in for the network
        for payload in payloads:
            self._queues[queue].put_nowait(payload)

    async def close(self) -> None:
        return None


class _MemoryConsumer:
    def __init__(self, queues: list[asyncio.Queue[bytes]]) -> None:
        self._queues = queues
        self._next = 0

    async def receive(self, max_messages: int) -> list[bytes]:
        queue = self._queues[self._next]
        self._next = (self._next + 1) % len(self._queues)
        try:
            first = await asyncio.wait_for(queue.get(), _RECEIVE_WAIT_S)
        except TimeoutError:
            return []
        out = [first]
        while len(out) < max_messages and not queue.empty():
            out.append(queue.get_nowait())
        return out

    async def close(self) -> None:
        return None


class MemoryDriver:
    def __init__(self, transactions: bool = True) -> None:
        self._queues: list[asyncio.Queue[bytes]] = []
        self._transactions = transactions

    def describe(self) -> DriverInfo:
        return DriverInfo(
            system="memory",
            product="in-process asyncio queues (harness self-check)",
            client="none",
            durability="none: messages live in this process's memory only",
            fsync_before_ack=False,
        )

    def supports(self, workload: Workload) -> str | None:
        if workload.transactional and not self._transactions:
            return "transactions disabled"
        return None

    async def setup(self, workload: Workload) -> None:
        self._queues = [asyncio.Queue() for _ in range(workload.queues)]

    async def producer(self, index: int) -> Producer:
        return _MemoryProducer(self._queues)

    async def consumer(self, index: int, queues: Sequence[int]) -> Consumer:
        return _MemoryConsumer([self._queues[q] for q in queues])

    def server_pids(self) -> list[int]:
        return []

    async def teardown(self) -> None:
        self._queues = []
