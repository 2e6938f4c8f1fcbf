"""``txmq bench``: compare txmq with the brokers users would pick instead, back to back (issue 8).

The harness lives in ``benchmarks/harness`` at the repository root (not in the installed package): it
needs the peers' client libraries (the ``bench`` extra) and is run from a checkout.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
from collections.abc import Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

if TYPE_CHECKING:
    from benchmarks.harness.workload import Workload

DEFAULT_SYSTEMS = (
    "txmq-sync,txmq-async,redis-always,redis-everysec,rabbitmq-quorum,rabbitmq-classic,nats-file"
)
DEFAULT_WORKLOADS = "batch-100,single-1,async-256,tx-8,e2e-500,consume-256"
T = TypeVar("T")


def ensure_harness_importable() -> None:
    """Put the checkout root on ``sys.path`` when ``benchmarks.harness`` is not importable yet."""
    try:
        import benchmarks.harness  # noqa: F401
    except ModuleNotFoundError:
        root = Path(__file__).resolve().parents[3]
        if not (root / "benchmarks" / "harness").is_dir():
            raise typer.BadParameter("benchmarks/harness not found: run txmq bench from a checkout") from None
        sys.path.insert(0, str(root))


def _console() -> Console:
    """A console wide enough for the table even when the output is a file or a pipe."""
    console = Console()
    return console if console.is_terminal else Console(width=150)


def _split(csv: str) -> list[str]:
    return [item.strip() for item in csv.split(",") if item.strip()]


def _run_async(coro: Coroutine[Any, Any, T], loop: str) -> T:
    """Run on uvloop when asked and installed (txmq's server uses it too), else plain asyncio."""
    if loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(coro)
    return asyncio.run(coro)


def compare_command(
    systems: Annotated[str, typer.Option(help="comma-separated system names (see `txmq bench list`)")] = (
        DEFAULT_SYSTEMS
    ),
    workloads: Annotated[str, typer.Option(help="comma-separated workload names")] = DEFAULT_WORKLOADS,
    duration: Annotated[float, typer.Option(help="measured seconds per run")] = 3.0,
    rounds: Annotated[int, typer.Option(help="A B A B rounds per workload")] = 2,
    out: Annotated[Path, typer.Option(help="directory for compare.json and compare.png")] = Path(
        "benchmarks/results"
    ),
    baseline: Annotated[str | None, typer.Option(help="system the ratios divide by (default: first)")] = None,
    preload: Annotated[int, typer.Option(help="messages stored before a consume workload")] = 20_000,
    chart: Annotated[bool, typer.Option(help="draw compare.png with matplotlib")] = True,
    loop: Annotated[str, typer.Option(help="uvloop or asyncio")] = "uvloop",
) -> None:
    """Run the chosen systems back to back, print medians and ratios, write JSON and a PNG chart."""
    ensure_harness_importable()
    from benchmarks.harness.compare import run_rounds, summarize
    from benchmarks.harness.report import draw_chart, render_table

    console = _console()
    chosen, plan = _plan(systems, workloads, duration, preload)
    base = baseline or chosen[0]

    def progress(round_no: int, result: dict[str, object]) -> None:
        rate = result.get("throughput_msg_s")
        shown = f"{rate:,.0f} msg/s" if isinstance(rate, float) else f"{result['status']}: {result['reason']}"
        console.print(f"round {round_no} {result['workload']:>14} {result['system']:>17}  {shown}")

    started = datetime.now(UTC).isoformat(timespec="seconds")
    results = _run_async(run_rounds(chosen, plan, rounds, progress), loop)
    rows = summarize(results, base)
    console.print(render_table(rows, base, title=f"{rounds} rounds x {duration:g} s, median"))
    _write_json(out / "compare.json", started, base, rounds, plan, rows, results)
    if chart:
        draw_chart(rows, out / "compare.png", base)
    console.print(f"wrote {out / 'compare.json'}" + (f" and {out / 'compare.png'}" if chart else ""))


def _plan(systems: str, workloads: str, duration: float, preload: int) -> tuple[list[str], list[Workload]]:
    """Validate the names against the registry and the standard workloads, then shrink to ``duration``."""
    from benchmarks.harness import STANDARD_WORKLOADS, available_systems

    chosen = _split(systems)
    unknown = [s for s in chosen if s not in available_systems()]
    if unknown or not chosen:
        raise typer.BadParameter(f"unknown systems {unknown}; known: {sorted(available_systems())}")
    names = _split(workloads)
    bad = [w for w in names if w not in STANDARD_WORKLOADS]
    if bad or not names:
        raise typer.BadParameter(f"unknown workloads {bad}; known: {sorted(STANDARD_WORKLOADS)}")
    return chosen, [
        STANDARD_WORKLOADS[w].scaled(duration_s=duration, preload_messages=preload) for w in names
    ]


def _write_json(
    path: Path,
    started: str,
    base: str,
    rounds: int,
    plan: list[Workload],
    rows: list[dict[str, object]],
    results: list[dict[str, object]],
) -> None:
    from benchmarks.harness.report import write_json

    document: dict[str, object] = {
        "command": " ".join(["txmq", *sys.argv[1:]]),
        "started": started,
        "host": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "baseline": base,
        "rounds": rounds,
        "workloads": [w.to_dict() for w in plan],
        "summary": rows,
        "runs": results,
    }
    write_json(path, document)


def list_command() -> None:
    """List the registered systems (with their durability) and the standard workloads."""
    ensure_harness_importable()
    from benchmarks.harness import STANDARD_WORKLOADS, available_systems

    console = _console()
    for name, summary in available_systems().items():
        console.print(f"system   {name:<18} {summary}")
    for name, workload in STANDARD_WORKLOADS.items():
        shape = f"{workload.producers} producer(s) x {workload.in_flight} in flight x batch {workload.batch}"
        extra = f", {workload.target_rate:g} msg/s" if workload.target_rate else ""
        extra += ", tx" if workload.transactional else ""
        extra += f", consume batches of {workload.consume_batch}" if workload.consumers else ""
        console.print(f"workload {name:<18} {workload.queues} queue(s), {shape}{extra}")


def report_command(
    directory: Annotated[Path, typer.Argument(help="a directory holding compare.json, or the file")],
    baseline: Annotated[str | None, typer.Option(help="system the ratios divide by")] = None,
    markdown: Annotated[bool, typer.Option(help="print a Markdown table (for a results README)")] = False,
) -> None:
    """Re-summarize a saved compare.json (e.g. with another baseline); redraw compare.png."""
    ensure_harness_importable()
    from benchmarks.harness.compare import summarize
    from benchmarks.harness.report import draw_chart, render_markdown, render_table

    directory, document = _saved_session(directory)
    base = baseline or str(document["baseline"])
    rows = summarize(document["runs"], base)
    if markdown:
        print(render_markdown(rows, base))
        return
    console = _console()
    console.print(f"command: {document.get('command', '?')}", soft_wrap=True)
    # a short title: a long command there would be cut, and with it the "ratios vs" part
    console.print(render_table(rows, base, title=f"session {document.get('started', '?')}, median"))
    draw_chart(rows, directory / "compare.png", base)


def goals_command(
    directory: Annotated[Path, typer.Argument(help="a directory holding compare.json, or the file")],
) -> None:
    """Issue 8's goals, goal by goal, from a saved compare.json: txmq's ratio to each peer, met or not."""
    ensure_harness_importable()
    from benchmarks.harness.compare import summarize
    from benchmarks.harness.goals import judge_all, markdown

    _, document = _saved_session(directory)
    rows = summarize(document["runs"], str(document["baseline"]))
    print(markdown(judge_all(rows)))


def _saved_session(path: Path) -> tuple[Path, dict[str, Any]]:
    """(its directory, the document) of a saved ``compare`` session: ``path`` is the directory
    ``compare --out`` wrote or its ``compare.json``; anything else is a usage error, not a traceback."""
    import json

    file = path if path.is_file() else path / "compare.json"
    try:
        document = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"{path}: no readable compare.json ({exc})") from exc
    if not isinstance(document, dict) or "runs" not in document or "baseline" not in document:
        raise typer.BadParameter(f"{file}: not a saved compare session (no runs or baseline)")
    return file.parent, document


def register(app: typer.Typer) -> None:
    bench = typer.Typer(help="Benchmarks: txmq against Redis Streams, RabbitMQ, NATS JetStream.")
    bench.command("compare")(compare_command)
    bench.command("list")(list_command)
    bench.command("report")(report_command)
    bench.command("goals")(goals_command)
    app.add_typer(bench, name="bench")
