"""The driver protocol: the only thing a messaging system must implement to be benchmarked.

Lifecycle, called by :func:`benchmarks.harness.runner.run_workload` for every run::

    reason = driver.supports(workload)          # None, or why this system cannot run it (shown as n/a)
    await driver.setup(workload)                # start private servers, create streams/queues
    p = await driver.producer(i)                # one per workload.producers (own connection each)
    c = await driver.consumer(i, queues)        # one per workload.consumers
    await p.send(queue, payloads)               # one request of len(payloads) messages; returns once
                                                # the system acknowledged all of them (durably, if
                                                # describe() says so). The runner keeps
                                                # workload.in_flight send() calls outstanding per producer.
    await c.receive(max_messages)               # up to max_messages payloads, already acknowledged;
                                                # [] after a short wait if nothing is there
    await p.close(); await c.close()
    await driver.teardown()                     # delete what setup created, stop private servers

A driver may also define ``client_pids() -> list[int]``: helper processes on the client side (txmq's
producer workers) whose CPU is added to the client's. A producer may define ``run_slot(first_queue,
workload, measure_from, deadline, interval_ns) -> SlotOutcome``: it then runs a whole slot's loop itself
(``runner.drive_slot``, the same loop) where it lives, e.g. in a worker process, so no per-request relay
from the harness process is measured.

Payloads are opaque bytes; the first 8 bytes carry the send timestamp used for end-to-end latency, so a
driver must deliver payloads unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from benchmarks.harness.workload import Workload


@dataclass(frozen=True)
class DriverInfo:
    """What a driver honestly does: shown next to every figure it produced."""

    system: str
    """Registry name, e.g. ``redis-always``."""
    product: str
    """Server and version, e.g. ``Redis 7.0.15 Streams``."""
    client: str
    """Client library and version, e.g. ``redis-py 5.2 (asyncio)``."""
    durability: str
    """One sentence: when is a message acknowledged, relative to fsync."""
    fsync_before_ack: bool

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class Producer(Protocol):
    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        """Publish ``payloads`` to queue ``queue`` as one request; return when all are acknowledged."""
        ...

    async def close(self) -> None: ...


class Consumer(Protocol):
    async def receive(self, max_messages: int) -> list[bytes]:
        """Return up to ``max_messages`` payloads, acknowledged to the system; [] after a short wait."""
        ...

    async def close(self) -> None: ...


class Driver(Protocol):
    def describe(self) -> DriverInfo: ...

    def supports(self, workload: Workload) -> str | None:
        """None if this driver can run ``workload``, else the reason it cannot (reported as n/a)."""
        ...

    async def setup(self, workload: Workload) -> None: ...

    async def producer(self, index: int) -> Producer: ...

    async def consumer(self, index: int, queues: Sequence[int]) -> Consumer: ...

    def server_pids(self) -> list[int]:
        """Processes whose CPU counts as the server's (may be empty if unknown)."""
        ...

    async def teardown(self) -> None: ...
