"""RocketMQ delay levels: ``"1s 5s 10s ..."`` -> milliseconds per level (level 1 is the first)."""

from __future__ import annotations

from txmq.common import errors
from txmq.common.durations import parse_duration_ms


def parse_delay_levels(text: str) -> tuple[int, ...]:
    parts = text.split()
    if not parts:
        raise errors.InvalidArgument("delay levels must list at least one duration")
    try:
        levels = tuple(parse_duration_ms(part) for part in parts)
    except ValueError as exc:
        raise errors.InvalidArgument(f"invalid delay levels {text!r}: {exc}") from None
    if any(level <= 0 for level in levels):
        raise errors.InvalidArgument("every delay level must be positive")
    return levels


def clamp_level(level: int, levels: tuple[int, ...]) -> int:
    """4.x clamps levels above the maximum to the maximum."""
    return max(1, min(level, len(levels)))


def deliver_at_ms(level: int, store_ms: int, levels: tuple[int, ...]) -> int:
    return store_ms + levels[clamp_level(level, levels) - 1]
