"""Present a comparison: a rich table, a JSON document and a PNG chart (matplotlib, imported lazily)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

Row = Mapping[str, object]


def _num(value: object, digits: int = 0) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:,.{digits}f}"


def _ratio(value: object) -> str:
    return f"{value:.2f}x" if isinstance(value, int | float) else "-"


def _medians(row: Row) -> Mapping[str, object]:
    medians = row.get("medians")
    return medians if isinstance(medians, Mapping) else {}


def render_table(rows: Sequence[Row], baseline: str, title: str = "median of rounds") -> Table:
    """Medians per (workload, system) and ratios to ``baseline``, measured in the same session."""
    table = Table(title=f"{title}; ratios vs {baseline}")
    for header in ("workload", "system", "msg/s", "x base", "pub p50", "pub p99", "e2e p99", "p99 x base"):
        table.add_column(header, justify="left" if header in ("workload", "system") else "right")
    table.add_column("cpu srv/cli %", justify="right")
    for row in rows:
        med = _medians(row)
        if row.get("status") != "ok":
            reasons = row.get("reasons")
            reason = "; ".join(str(r) for r in reasons) if isinstance(reasons, list) else ""
            table.add_row(str(row["workload"]), str(row["system"]), f"{row.get('status')}: {reason}"[:60])
            continue
        cpu = f"{_num(med.get('server_cpu_pct'))}/{_num(med.get('client_cpu_pct'))}"
        table.add_row(
            str(row["workload"]),
            str(row["system"]),
            _num(med.get("throughput_msg_s")),
            _ratio(row.get("throughput_ratio")),
            _num(med.get("publish_p50_ms"), 2),
            _num(med.get("publish_p99_ms"), 2),
            _num(med.get("e2e_p99_ms"), 2),
            _ratio(row.get("latency_ratio")),
            cpu,
        )
    return table


def render_markdown(rows: Sequence[Row], baseline: str) -> str:
    """The same medians as :func:`render_table`, as a Markdown table for a results README."""
    head = (
        f"| workload | system | msg/s | x {baseline} | pub p50 ms | pub p99 ms | e2e p99 ms | cpu srv/cli % |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        med = _medians(row)
        if row.get("status") != "ok":
            reasons = row.get("reasons")
            reason = "; ".join(str(r) for r in reasons) if isinstance(reasons, list) else ""
            lines.append(f"| {row['workload']} | {row['system']} | {row.get('status')}: {reason} | | | | | |")
            continue
        cells = [
            _num(med.get("throughput_msg_s")),
            _ratio(row.get("throughput_ratio")),
            _num(med.get("publish_p50_ms"), 2),
            _num(med.get("publish_p99_ms"), 2),
            _num(med.get("e2e_p99_ms"), 2),
            f"{_num(med.get('server_cpu_pct'))}/{_num(med.get('client_cpu_pct'))}",
        ]
        lines.append(f"| {row['workload']} | {row['system']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: Path, document: Mapping[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")


def _panel(ax: Any, workload: str, mine: Sequence[Row]) -> None:
    """Bars of msg/s, or of end-to-end p99 for paced workloads (where the rate is fixed by design)."""
    latency = any(_medians(r).get("e2e_p99_ms") is not None for r in mine)
    metric, ratio_key = (
        ("e2e_p99_ms", "latency_ratio") if latency else ("throughput_msg_s", "throughput_ratio")
    )
    names = [str(r["system"]) for r in mine]
    values = [_medians(r).get(metric) for r in mine]
    heights = [float(v) if isinstance(v, int | float) else 0.0 for v in values]
    bars = ax.bar(range(len(names)), heights, color="#c44e52" if latency else "#4c72b0")
    for bar, row in zip(bars, mine, strict=True):
        top = (bar.get_x() + bar.get_width() / 2, bar.get_height())
        ax.annotate(_ratio(row.get(ratio_key)), top, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_title(workload)
    ax.set_ylabel("e2e p99 ms (median, lower is better)" if latency else "msg/s (median)")


def draw_chart(rows: Sequence[Row], path: Path, baseline: str) -> None:
    """One panel per workload, one bar per system, each labelled with its ratio to ``baseline``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(str(r["workload"]) for r in rows))
    cols = min(3, len(workloads)) or 1
    lines = (len(workloads) + cols - 1) // cols or 1
    fig, axes = plt.subplots(lines, cols, figsize=(5 * cols, 3.6 * lines), squeeze=False)
    for i, workload in enumerate(workloads):
        _panel(axes[i // cols][i % cols], workload, [r for r in rows if r["workload"] == workload])
    for j in range(len(workloads), lines * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle(f"1 KB messages, ratios vs {baseline} (same session)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
