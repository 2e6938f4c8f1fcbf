"""``clock.now_ms_of(clock)`` is ``clock.now_ms()`` for every clock: the system clock's time read
without the method call, any other clock (a fake, a subclass of the system clock, any object with the
protocol) asked through its own method."""

from __future__ import annotations

import time

from txmq.common.clock import FakeClock, SystemClock, now_ms_of


def test_system_clock_reads_the_wall_clock() -> None:
    before = time.time_ns() // 1_000_000
    got = now_ms_of(SystemClock())
    after = time.time_ns() // 1_000_000
    assert before <= got <= after
    assert isinstance(got, int)


def test_fake_clock_is_asked() -> None:
    clock = FakeClock(start_ms=1234)
    assert now_ms_of(clock) == 1234
    clock.advance(5)
    assert now_ms_of(clock) == 1239


class _Frozen(SystemClock):
    def now_ms(self) -> int:
        return 42


class _Duck:
    def now_ms(self) -> int:
        return 7

    def monotonic_ms(self) -> int:
        return 0


def test_subclass_and_other_clocks_use_their_method() -> None:
    assert now_ms_of(_Frozen()) == 42
    assert now_ms_of(_Duck()) == 7
