"""Parse human durations: ``500ms``, ``6s``, ``1m``, ``2h``, ``1d`` (a bare number means seconds)."""

from __future__ import annotations

import re

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration_ms(text: str) -> int:
    """Return the duration in milliseconds, or raise ``ValueError`` with the accepted forms."""
    match = _PATTERN.match(text)
    if match is None:
        raise ValueError(
            f"invalid duration {text!r}: use a number with ms, s, m, h or d (e.g. 500ms, 6s, 1m)"
        )
    value = float(match.group(1))
    unit = match.group(2) or "s"
    return round(value * _UNITS_MS[unit])


def format_duration_ms(value_ms: int) -> str:
    for unit in ("d", "h", "m", "s"):
        size = _UNITS_MS[unit]
        if value_ms >= size and value_ms % size == 0:
            return f"{value_ms // size}{unit}"
    return f"{value_ms}ms"
