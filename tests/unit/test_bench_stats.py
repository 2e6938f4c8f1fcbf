"""Percentile maths, medians, the reduction of runs to medians and ratios, and the rendered table."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest
from benchmarks.harness.compare import flatten, summarize
from benchmarks.harness.report import draw_chart, render_table, write_json
from benchmarks.harness.stats import median, percentile, summarize_ns
from benchmarks.harness.workload import STANDARD_WORKLOADS, Workload
from rich.console import Console


def test_nearest_rank_percentiles_of_one_to_hundred() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 99.9) == 100.0
    assert percentile(values, 100) == 100.0
    assert percentile(values, 0.5) == 1.0


def test_percentile_of_small_samples_never_interpolates() -> None:
    assert percentile([7.0], 99.9) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 51) == 3.0


@pytest.mark.parametrize("q", [0.0, -1.0, 100.01])
def test_percentile_rejects_out_of_range_q(q: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], q)


def test_percentile_and_median_reject_empty() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        median([])


def test_median_odd_and_even() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_summarize_ns_reports_milliseconds() -> None:
    samples = [i * 1_000_000 for i in range(1, 1001)]  # 1..1000 ms
    summary = summarize_ns(samples)
    assert summary is not None
    assert summary["p50_ms"] == 500.0
    assert summary["p99_ms"] == 990.0
    assert summary["p999_ms"] == 999.0
    assert summary["max_ms"] == 1000.0
    assert summary["count"] == 1000.0
    assert summarize_ns([]) is None


def _run(system: str, workload: str, rate: float, p99: float, status: str = "ok") -> dict[str, object]:
    if status != "ok":
        return {"system": system, "workload": workload, "status": status, "reason": "no tx"}
    return {
        "system": system,
        "workload": workload,
        "status": "ok",
        "throughput_msg_s": rate,
        "publish_latency": {"p50_ms": p99 / 2, "p99_ms": p99, "p999_ms": p99 * 2},
        "e2e_latency": None,
        "cpu": {"server_pct": 50.0, "client_pct": 90.0},
    }


def test_summarize_takes_medians_and_ratios_to_the_baseline() -> None:
    runs = [
        _run("a", "w", 100.0, 2.0),
        _run("b", "w", 300.0, 1.0),
        _run("a", "w", 200.0, 4.0),
        _run("b", "w", 500.0, 3.0),
        _run("a", "w", 150.0, 3.0),
        _run("b", "w", 400.0, 2.0),
        _run("a", "t", 10.0, 1.0),
        _run("b", "t", 0.0, 0.0, status="n/a"),
    ]
    rows = {(r["workload"], r["system"]): r for r in summarize(runs, baseline="a")}
    b = rows[("w", "b")]
    assert b["medians"]["throughput_msg_s"] == 400.0  # type: ignore[index]
    assert b["throughput_ratio"] == pytest.approx(400.0 / 150.0)
    assert b["latency_metric"] == "publish_p99_ms"
    assert b["latency_ratio"] == pytest.approx(2.0 / 3.0)
    assert rows[("w", "a")]["throughput_ratio"] == 1.0
    na = rows[("t", "b")]
    assert na["status"] == "n/a"
    assert na["reasons"] == ["no tx"]
    assert na["throughput_ratio"] is None


def test_flatten_prefers_missing_to_zero() -> None:
    flat = flatten({"status": "ok", "throughput_msg_s": 5.0, "publish_latency": None})
    assert flat["throughput_msg_s"] == 5.0
    assert flat["publish_p99_ms"] is None
    assert flat["e2e_p99_ms"] is None


def test_table_json_and_chart(tmp_path: Path) -> None:
    runs = [_run("a", "w", 100.0, 2.0), _run("b", "w", 250.0, 1.0), _run("b", "t", 0, 0, status="n/a")]
    rows = summarize(runs, baseline="a")
    out = io.StringIO()
    Console(file=out, width=200).print(render_table(rows, "a"))
    text = out.getvalue()
    assert "2.50x" in text
    assert "250" in text
    assert "n/a: no tx" in text
    write_json(tmp_path / "r" / "c.json", {"summary": rows})
    assert json.loads((tmp_path / "r" / "c.json").read_text())["summary"][1]["system"] == "b"
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("the bench extra (matplotlib) is not installed")
    draw_chart(rows, tmp_path / "c.png", "a")
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_workload_validation_and_scaling() -> None:
    with pytest.raises(ValueError):
        Workload("bad", in_flight=0)
    with pytest.raises(ValueError):
        Workload("bad", preload_messages=10)
    with pytest.raises(ValueError):
        Workload("bad", topics=2)
    small = STANDARD_WORKLOADS["consume-256"].scaled(duration_s=0.5, preload_messages=100)
    assert (small.duration_s, small.preload_messages) == (0.5, 100)
    produce = STANDARD_WORKLOADS["single-1"].scaled(duration_s=0.4, preload_messages=100)
    assert produce.preload_messages == 0
    assert produce.warmup_s <= 0.1
