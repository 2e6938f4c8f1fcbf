"""A TCP fault proxy for process-level chaos: sits between real clients and a broker port.

Each accepted connection gets one :class:`ConnectionPlan`, drawn by the pure :class:`FaultSchedule` from
a seed and the connection's index, so a failing run is replayed by its seed (the *timing* of real
sockets still varies; which connection gets which fault does not). The I/O shell,
:class:`FaultProxy`, only executes plans:

* ``delay``: every chunk, both ways, waits ``delay_ms`` before it is forwarded (order kept);
* ``blackhole``: after ``after_bytes`` from the client, nothing more is forwarded either way and the
  connection stays open: the client sees a silent peer and must time out (a dropped network);
* ``reset``: after ``after_bytes`` from the client, both sides are closed with a TCP RST, mid-stream;
* ``stall``: after ``after_bytes`` from the client, forwarding pauses for ``stall_ms``, then resumes.

Why a proxy and not only the simulator: the simulator proves the broker's logic; the proxy proves the
real SDK, the real official client and the real socket code recover from what networks really do.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import random
import socket
import struct
from dataclasses import dataclass, field
from typing import Final

_CHUNK_BYTES: Final = 64 * 1024


class Fault(enum.Enum):
    NONE = "none"
    DELAY = "delay"
    BLACKHOLE = "blackhole"
    RESET = "reset"
    STALL = "stall"


@dataclass(frozen=True)
class ConnectionPlan:
    """What the proxy does to one connection."""

    fault: Fault = Fault.NONE
    delay_ms: int = 0
    after_bytes: int = 0
    stall_ms: int = 0


@dataclass(frozen=True)
class FaultRates:
    """Probability of each fault per connection (the rest pass untouched)."""

    delay: float = 0.1
    blackhole: float = 0.05
    reset: float = 0.15
    stall: float = 0.1
    delay_ms_max: int = 50
    after_bytes_max: int = 16 * 1024
    stall_ms_max: int = 1_500

    def total(self) -> float:
        return self.delay + self.blackhole + self.reset + self.stall


DEFAULT_RATES: Final = FaultRates()
QUIET: Final = FaultRates(delay=0.0, blackhole=0.0, reset=0.0, stall=0.0)


class FaultSchedule:
    """Pure: the plan of connection ``index`` is a function of (seed, index, rates) only."""

    def __init__(self, seed: int, rates: FaultRates = DEFAULT_RATES) -> None:
        if not 0.0 <= rates.total() <= 1.0:
            raise ValueError("fault probabilities must add up to at most 1")
        self.seed = seed
        self.rates = rates

    def plan(self, index: int) -> ConnectionPlan:
        rng = random.Random(f"{self.seed}:{index}")
        r, rates = rng.random(), self.rates
        after = rng.randrange(0, rates.after_bytes_max + 1)
        if r < rates.delay:
            return ConnectionPlan(Fault.DELAY, delay_ms=rng.randint(1, max(1, rates.delay_ms_max)))
        r -= rates.delay
        if r < rates.blackhole:
            return ConnectionPlan(Fault.BLACKHOLE, after_bytes=after)
        r -= rates.blackhole
        if r < rates.reset:
            return ConnectionPlan(Fault.RESET, after_bytes=after)
        r -= rates.reset
        if r < rates.stall:
            return ConnectionPlan(Fault.STALL, after_bytes=after, stall_ms=rng.randint(1, rates.stall_ms_max))
        return ConnectionPlan()


@dataclass
class ProxyFigures:
    connections: int = 0
    upstream_failures: int = 0
    faults: dict[str, int] = field(default_factory=dict)  # fault name -> connections where it fired
    bytes_up: int = 0
    bytes_down: int = 0


class FaultProxy:
    """Listens on ``host:port`` (0: a free port) and forwards every connection to ``upstream``."""

    def __init__(self, upstream: tuple[str, int], schedule: FaultSchedule, host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.schedule = schedule
        self.host = host
        self.figures = ProxyFigures()
        self._server: asyncio.Server | None = None
        self._index = 0
        self._live: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the proxy first"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, port, reuse_address=True)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.reset_all()
        for task in list(self._live):
            task.cancel()
        if self._live:
            await asyncio.gather(*self._live, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def reset_all(self) -> None:
        """RST every live connection (what clients see when the broker host disappears)."""
        for writer in list(self._writers):
            _rst(writer)

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._live.add(task)
        plan = self.schedule.plan(self._index)
        self._index += 1
        self.figures.connections += 1
        try:
            try:
                up_r, up_w = await asyncio.open_connection(*self.upstream)
            except OSError:
                self.figures.upstream_failures += 1
                _rst(client_w)
                return
            self._writers.update((client_w, up_w))
            try:
                await _Session(plan, self.figures, (client_r, client_w), (up_r, up_w)).run()
            finally:
                for writer in (client_w, up_w):
                    self._writers.discard(writer)
                    writer.close()
        except asyncio.CancelledError:
            pass
        finally:
            self._live.discard(task)


class _Session:
    """One proxied connection executing its plan; the client-to-upstream byte count triggers faults."""

    def __init__(
        self,
        plan: ConnectionPlan,
        figures: ProxyFigures,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.plan = plan
        self.figures = figures
        self.client = client
        self.upstream = upstream
        self.sent_up = 0
        self.fired = False
        self.silenced = False
        self.resume = asyncio.Event()
        self.resume.set()

    def _fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        name = self.plan.fault.value
        self.figures.faults[name] = self.figures.faults.get(name, 0) + 1
        if self.plan.fault is Fault.BLACKHOLE:
            self.silenced = True
        elif self.plan.fault is Fault.RESET:
            _rst(self.client[1])
            _rst(self.upstream[1])
        elif self.plan.fault is Fault.STALL:
            self.resume.clear()
            asyncio.get_running_loop().call_later(self.plan.stall_ms / 1000, self.resume.set)

    async def run(self) -> None:
        if self.plan.fault is Fault.DELAY:
            self._fire()
        up = asyncio.create_task(self._pump(self.client[0], self.upstream[1], upward=True))
        down = asyncio.create_task(self._pump(self.upstream[0], self.client[1], upward=False))
        try:
            await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (up, down):
                task.cancel()
            await asyncio.gather(up, down, return_exceptions=True)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, upward: bool
    ) -> None:
        plan = self.plan
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                data = await reader.read(_CHUNK_BYTES)
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    if self.silenced:
                        await asyncio.Event().wait()  # a black hole never tells the other side
                    return
                if upward:
                    self.sent_up += len(data)
                    if plan.fault is not Fault.NONE and self.sent_up > plan.after_bytes:
                        self._fire()
                if self.fired and plan.fault is Fault.RESET:
                    return
                if self.silenced:
                    continue
                await self.resume.wait()
                if plan.fault is Fault.DELAY:
                    await asyncio.sleep(plan.delay_ms / 1000)
                writer.write(data)
                await writer.drain()
                if upward:
                    self.figures.bytes_up += len(data)
                else:
                    self.figures.bytes_down += len(data)


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with SO_LINGER 0 so the peer gets a TCP RST, not a polite FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport = writer.transport
    transport.abort()
