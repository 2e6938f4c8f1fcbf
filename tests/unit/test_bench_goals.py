"""Issue 8's goal verdicts from summary rows, and the raw-disk reference driver."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness import STANDARD_WORKLOADS, run_workload
from benchmarks.harness.drivers.disk import DiskGroupCommitDriver
from benchmarks.harness.goals import GOALS, Goal, judge, judge_all, markdown
from typer.testing import CliRunner


def _row(workload: str, system: str, status: str = "ok", **medians: float) -> dict[str, object]:
    return {"workload": workload, "system": system, "status": status, "medians": medians}


def test_throughput_goal_uses_the_strongest_peer() -> None:
    goal = Goal("tx", "tx-8", "txmq-sync", ("rabbitmq-classic", "rabbitmq-quorum"), "throughput_msg_s", 2.0)
    rows = [
        _row("tx-8", "txmq-sync", throughput_msg_s=5000.0),
        _row("tx-8", "rabbitmq-classic", throughput_msg_s=2400.0),
        _row("tx-8", "rabbitmq-quorum", throughput_msg_s=1600.0),
    ]
    verdict = judge(goal, rows)
    assert verdict.peer == "rabbitmq-classic"
    assert verdict.ratio is not None
    assert abs(verdict.ratio - 5000 / 2400) < 1e-9
    assert verdict.met is True
    rows[1] = _row("tx-8", "rabbitmq-classic", throughput_msg_s=2600.0)
    assert judge(goal, rows).met is False


def test_latency_goal_is_met_when_lower() -> None:
    goal = Goal("e2e", "e2e-500", "txmq-sync", ("redis-always",), "e2e_p99_ms", 2.0)
    ok = [_row("e2e-500", "txmq-sync", e2e_p99_ms=1.9), _row("e2e-500", "redis-always", e2e_p99_ms=1.0)]
    assert judge(goal, ok).met is True
    slow = [_row("e2e-500", "txmq-sync", e2e_p99_ms=2.1), _row("e2e-500", "redis-always", e2e_p99_ms=1.0)]
    assert judge(goal, slow).met is False


def test_absolute_goal_and_missing_sides() -> None:
    floor = Goal("consume", "consume-256", "txmq-sync", (), "throughput_msg_s", 100_000.0)
    assert judge(floor, [_row("consume-256", "txmq-sync", throughput_msg_s=99_000.0)]).met is False
    assert judge(floor, [_row("consume-256", "txmq-sync", throughput_msg_s=101_000.0)]).met is True
    failed = [_row("consume-256", "txmq-sync", status="error", throughput_msg_s=1e6)]
    assert judge(floor, failed).met is None  # an errored run is not evidence
    verdicts = judge_all([])
    assert len(verdicts) == len(GOALS)
    assert all(v.met is None for v in verdicts)
    assert markdown(verdicts).count("not measured") == len(GOALS)


def test_goals_cli_reads_a_saved_session(tmp_path: Path) -> None:
    import typer

    from txmq.cli.bench import register

    runs = [
        {**_row("single-1", "txmq-sync"), "throughput_msg_s": 3000.0, "round": 1},
        {**_row("single-1", "redis-always"), "throughput_msg_s": 2000.0, "round": 1},
    ]
    document = {"baseline": "txmq-sync", "runs": runs}
    (tmp_path / "compare.json").write_text(json.dumps(document))
    app = typer.Typer()
    register(app)
    outcome = CliRunner().invoke(app, ["bench", "goals", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    line = next(x for x in outcome.output.splitlines() if "1x Redis always" in x)
    assert "1.50x" in line
    assert "| yes |" in line


def test_goals_and_report_take_the_saved_file_too_and_refuse_anything_else(tmp_path: Path) -> None:
    import typer

    from txmq.cli.bench import register

    runs = [{**_row("single-1", "txmq-sync"), "throughput_msg_s": 3000.0, "round": 1}]
    saved = tmp_path / "compare.json"
    saved.write_text(json.dumps({"baseline": "txmq-sync", "runs": runs}))
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    assert runner.invoke(app, ["bench", "goals", str(saved)]).exit_code == 0
    assert runner.invoke(app, ["bench", "report", str(saved), "--markdown"]).exit_code == 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "compare.json").write_text("[1, 2]")
    for wrong in (tmp_path / "missing", tmp_path / "other"):
        outcome = runner.invoke(app, ["bench", "goals", str(wrong)])
        assert outcome.exit_code == 2, outcome.output  # a usage error with its reason, no traceback
        assert "compare" in outcome.output
        assert not isinstance(outcome.exception, (OSError, ValueError))


async def test_raw_disk_reference_driver() -> None:
    driver = DiskGroupCommitDriver()
    assert driver.describe().fsync_before_ack
    result = await run_workload(driver, STANDARD_WORKLOADS["async-256"].scaled(duration_s=0.3))
    assert result["status"] == "ok", result.get("reason")
    assert isinstance(result["acked_messages"], int)
    assert result["acked_messages"] > 0
    consume = await run_workload(driver, STANDARD_WORKLOADS["consume-256"].scaled(duration_s=0.3))
    assert consume["status"] == "n/a"
