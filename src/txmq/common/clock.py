"""Injected time. Storage and broker services never read the wall clock directly.

``Clock.now_ms()`` is wall time in epoch milliseconds (what RocketMQ stores as store/born timestamps);
``Clock.monotonic_ms()`` is for measuring intervals. ``FakeClock`` advances only when told to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, Protocol

try:  # mypyc reads the decorator at compile time; mypy_extensions is not a run-time dependency
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover - pure Python without mypy installed: a decorator doing nothing

    def mypyc_attr(*_args: object, **_kwargs: object) -> Callable[[type], type]:  # type: ignore[misc]
        return lambda cls: cls


# bound once: compiled code calls them straight from a C static, no attribute read on the module
_TIME_NS: Final = time.time_ns
_MONOTONIC_NS: Final = time.monotonic_ns


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic_ms(self) -> int: ...


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (a call per record), still subclassable
class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return _TIME_NS() // 1_000_000

    def monotonic_ms(self) -> int:
        return _MONOTONIC_NS() // 1_000_000


def now_ms_of(clock: Clock) -> int:
    """``clock.now_ms()``; for the system clock itself (not a subclass) the time read here, without a
    method call through the :class:`Clock` protocol (a generic call to compiled code: a few per record)."""
    if type(clock) is SystemClock:
        return _TIME_NS() // 1_000_000
    return clock.now_ms()


@mypyc_attr(allow_interpreted_subclasses=True)
class FakeClock:
    """A clock for tests and simulation: time moves only through :meth:`advance` / :meth:`set`."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._monotonic_ms = 0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> int:
        return self._monotonic_ms

    def advance(self, delta_ms: int) -> None:
        if delta_ms < 0:
            raise ValueError("a clock never goes back")
        self._now_ms += delta_ms
        self._monotonic_ms += delta_ms

    def set(self, now_ms: int) -> None:
        self.advance(now_ms - self._now_ms)
