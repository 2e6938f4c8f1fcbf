"""A faulty network between simulated clients and the broker, in one process.

An RPC is a coroutine factory taking the broker (so a call delayed across a restart reaches the broker
that is running when it arrives). Faults, drawn from the simulation's seeded RNG:

* ``drop_request``: the broker never sees the call; the client times out (outcome unknown to it);
* ``drop_reply``: the broker runs the call, the client times out;
* ``duplicate``: the broker runs the call twice (a retransmission); the client gets the first reply;
* ``delay``: the client times out now; the call reaches the broker at a later step.

The client sees :class:`RpcTimeout` for every fault but duplication, exactly as over a real socket.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from txmq.common.errors import TxmqError

Rpc = Callable[[Any], Awaitable[Any]]


class RpcTimeout(Exception):
    """The client got no reply; the call may or may not have run."""


@dataclass
class NetworkFaults:
    drop_request: float = 0.0
    drop_reply: float = 0.0
    duplicate: float = 0.0
    delay: float = 0.0


@dataclass
class FaultyNetwork:
    rng: random.Random
    faults: NetworkFaults = field(default_factory=NetworkFaults)
    delayed: list[tuple[str, Rpc]] = field(default_factory=list)
    injected: dict[str, int] = field(default_factory=dict)

    def _draw(self, allow_delay: bool) -> str | None:
        f = self.faults
        roll = self.rng.random()
        for name, p in (
            ("drop_request", f.drop_request),
            ("drop_reply", f.drop_reply),
            ("duplicate", f.duplicate),
            ("delay", f.delay if allow_delay else 0.0),
        ):
            if roll < p:
                self.injected[name] = self.injected.get(name, 0) + 1
                return name
            roll -= p
        return None

    async def call(self, broker: Any, name: str, rpc: Rpc, *, allow_delay: bool = True) -> Any:
        """Run ``rpc`` through the network; raise RpcTimeout when the reply does not come back."""
        fault = self._draw(allow_delay)
        if fault == "drop_request":
            raise RpcTimeout(f"{name}: request lost")
        if fault == "delay":
            self.delayed.append((name, rpc))
            raise RpcTimeout(f"{name}: request delayed")
        result = await rpc(broker)
        if fault == "duplicate":
            try:
                await rpc(broker)
            except TxmqError:
                pass  # the retransmission's own answer never reaches the client
        if fault == "drop_reply":
            raise RpcTimeout(f"{name}: reply lost")
        return result

    def take_delayed(self, count: int) -> list[tuple[str, Rpc]]:
        """The ``count`` oldest delayed calls, now arriving at the broker."""
        arrived, self.delayed = self.delayed[:count], self.delayed[count:]
        return arrived

    def heal(self) -> None:
        self.faults = NetworkFaults()
