"""Reconnect and retry pacing: exponential back-off with jitter (pure), and the client status enum.

Jitter spreads the reconnect attempts of many clients after a broker restart, so they do not all hit
the broker in the same millisecond ("thundering herd").
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass


class ClientStatus(enum.Enum):
    """Where a client is in its life: CREATED -> RUNNING -> CLOSING -> CLOSED."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


@dataclass(frozen=True, slots=True)
class Backoff:
    """``initial_s * multiplier**attempt`` capped at ``max_s``, then +-``jitter`` (a fraction)."""

    initial_s: float = 0.05
    max_s: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float:
        """The pause before retry number ``attempt`` (0 = the first retry).

        >>> Backoff(initial_s=1, jitter=0).delay_s(3)
        2.0
        """
        base = min(self.max_s, self.initial_s * self.multiplier ** max(0, attempt))
        if not self.jitter:
            return base
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, base * (1.0 + spread))
