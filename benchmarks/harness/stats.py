"""Percentiles and latency summaries (nearest-rank, the definition HdrHistogram and OMB report)."""

from __future__ import annotations

import math
from collections.abc import Sequence

NS_PER_MS = 1_000_000.0


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence: the smallest value with >= q% at or below it."""
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 < q <= 100.0:
        raise ValueError("q must be in (0, 100]")
    # Round first: 99.9 / 100 * 1000 is 999.0000000000001 in binary floating point, not 999.
    rank = math.ceil(round(q / 100.0 * len(sorted_values), 9))
    return float(sorted_values[max(rank, 1) - 1])


def summarize_ns(samples_ns: Sequence[int]) -> dict[str, float] | None:
    """p50 / p99 / p99.9 / max / mean in milliseconds of nanosecond samples; None when there are none."""
    if not samples_ns:
        return None
    ordered = sorted(samples_ns)
    return {
        "count": float(len(ordered)),
        "p50_ms": percentile(ordered, 50.0) / NS_PER_MS,
        "p99_ms": percentile(ordered, 99.0) / NS_PER_MS,
        "p999_ms": percentile(ordered, 99.9) / NS_PER_MS,
        "max_ms": ordered[-1] / NS_PER_MS,
        "mean_ms": sum(ordered) / len(ordered) / NS_PER_MS,
    }


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence (mean of the middle two for even lengths)."""
    if not values:
        raise ValueError("median of an empty sequence")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0
