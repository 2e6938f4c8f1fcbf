"""Run systems back to back (A B A B ...) over several rounds and reduce the runs to medians and ratios.

Absolute figures on a shared machine drift by 2x between minutes; ratios of runs interleaved in one
session do not, so every row carries its ratio to a baseline system measured in the same session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from benchmarks.harness.registry import make_driver
from benchmarks.harness.runner import run_workload
from benchmarks.harness.stats import median
from benchmarks.harness.workload import Workload

Result = dict[str, object]

METRICS: tuple[str, ...] = (
    "throughput_msg_s",
    "publish_p50_ms",
    "publish_p99_ms",
    "publish_p999_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "server_cpu_pct",
    "client_cpu_pct",
)


def _get(mapping: object, key: str) -> float | None:
    if isinstance(mapping, Mapping):
        value = mapping.get(key)
        if isinstance(value, int | float):
            return float(value)
    return None


def flatten(result: Mapping[str, object]) -> dict[str, float | None]:
    """The scalar metrics of one run result (None where the run did not measure them)."""
    pub, e2e, cpu = result.get("publish_latency"), result.get("e2e_latency"), result.get("cpu")
    return {
        "throughput_msg_s": _get(result, "throughput_msg_s"),
        "publish_p50_ms": _get(pub, "p50_ms"),
        "publish_p99_ms": _get(pub, "p99_ms"),
        "publish_p999_ms": _get(pub, "p999_ms"),
        "e2e_p50_ms": _get(e2e, "p50_ms"),
        "e2e_p99_ms": _get(e2e, "p99_ms"),
        "server_cpu_pct": _get(cpu, "server_pct"),
        "client_cpu_pct": _get(cpu, "client_pct"),
    }


async def run_rounds(
    systems: Sequence[str],
    workloads: Sequence[Workload],
    rounds: int,
    on_result: Callable[[int, Result], None] | None = None,
) -> list[Result]:
    """For each workload, ``rounds`` times, every system in order: a fresh driver per run."""
    results: list[Result] = []
    for workload in workloads:
        for round_no in range(1, rounds + 1):
            for system in systems:
                result = await run_workload(make_driver(system), workload)
                result["system"] = system  # the registry name the user chose and ratios refer to
                result["round"] = round_no
                results.append(result)
                if on_result is not None:
                    on_result(round_no, result)
    return results


def _latency_key(metrics: Mapping[str, float | None]) -> str:
    """The latency a row is judged by: end-to-end when measured, else publish."""
    return "e2e_p99_ms" if metrics.get("e2e_p99_ms") is not None else "publish_p99_ms"


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base


def summarize(results: Sequence[Mapping[str, object]], baseline: str) -> list[dict[str, object]]:
    """One row per (workload, system), in first-seen order: medians of ok runs, ratios to ``baseline``."""
    groups: dict[tuple[str, str], list[Mapping[str, object]]] = {}
    for result in results:
        groups.setdefault((str(result["workload"]), str(result["system"])), []).append(result)
    medians: dict[tuple[str, str], dict[str, float | None]] = {}
    rows: list[dict[str, object]] = []
    for (workload, system), runs in groups.items():
        ok = [flatten(r) for r in runs if r.get("status") == "ok"]
        values: dict[str, float | None] = {}
        for metric in METRICS:
            samples = [m[metric] for m in ok if m[metric] is not None]
            values[metric] = median([s for s in samples if s is not None]) if samples else None
        medians[(workload, system)] = values
        reasons = sorted({str(r.get("reason")) for r in runs if r.get("status") != "ok"})
        status = "ok" if ok else str(runs[0].get("status"))
        rows.append(
            {"workload": workload, "system": system, "status": status, "ok_runs": len(ok), "runs": len(runs)}
            | {"reasons": reasons, "medians": values}
        )
    for row in rows:
        values = medians[(str(row["workload"]), str(row["system"]))]
        base = medians.get((str(row["workload"]), baseline), {})
        key = _latency_key(values)
        row["latency_metric"] = key
        row["throughput_ratio"] = _ratio(values["throughput_msg_s"], base.get("throughput_msg_s"))
        row["latency_ratio"] = _ratio(values[key], base.get(key))
    return rows
