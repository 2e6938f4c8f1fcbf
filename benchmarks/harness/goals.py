"""Issue 8's goals, checked against the medians of one ``compare`` session.

Each goal is a ratio of txmq to a peer measured in the same session (or an absolute floor), so the
verdict does not depend on how busy the shared machine was, only on the ratio.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Row = Mapping[str, object]


@dataclass(frozen=True)
class Goal:
    text: str
    """The goal as the issue words it."""
    workload: str
    system: str
    """The txmq system judged."""
    peers: tuple[str, ...]
    """Compared with the best of these peers (by the metric); empty for an absolute goal."""
    metric: str
    factor: float
    """throughput: mine >= factor x peer (or >= factor if no peers); latency: mine <= factor x peer."""

    @property
    def lower_is_better(self) -> bool:
        return self.metric.endswith("_ms")


GOALS: tuple[Goal, ...] = (
    Goal("batched produce >= 2x Redis everysec (pipelined XADD)", "batch-100", "txmq-sync",
         ("redis-everysec",), "throughput_msg_s", 2.0),
    Goal("one in flight, fsync >= 1x Redis always", "single-1", "txmq-sync",
         ("redis-always",), "throughput_msg_s", 1.0),
    Goal("one in flight, fsync >= 2x RabbitMQ quorum (confirms)", "single-1", "txmq-sync",
         ("rabbitmq-quorum",), "throughput_msg_s", 2.0),
    Goal("one in flight, publish p99 <= 1 ms", "single-1", "txmq-sync", (), "publish_p99_ms", 1.0),
    Goal("256 in flight, async flush >= 1.5x NATS JetStream publish_async", "async-256", "txmq-async",
         ("nats-file",), "throughput_msg_s", 1.5),
    Goal("transactions, 8 producers, fsync >= 2x RabbitMQ tx.commit (best queue type)", "tx-8", "txmq-sync",
         ("rabbitmq-classic", "rabbitmq-quorum"), "throughput_msg_s", 2.0),
    Goal("e2e p99 at 500 msg/s, fsync <= 2x Redis always", "e2e-500", "txmq-sync",
         ("redis-always",), "e2e_p99_ms", 2.0),
    Goal("consume, batches of 256 >= 100k msg/s", "consume-256", "txmq-sync", (), "throughput_msg_s",
         100_000.0),
    Goal("consume, batches of 256 >= 1.5x RabbitMQ quorum", "consume-256", "txmq-sync",
         ("rabbitmq-quorum",), "throughput_msg_s", 1.5),
    Goal("group-commit appends >= 60% of raw write+fdatasync group commit (through the broker)",
         "batch-100-q16", "txmq-sync", ("disk-groupcommit",), "throughput_msg_s", 0.6),
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    goal: Goal
    mine: float | None
    peer: str | None
    peer_value: float | None
    ratio: float | None
    """mine / peer (or mine / factor for an absolute goal)."""
    met: bool | None
    """None when a side was not measured in the session."""


def _median(rows: Sequence[Row], workload: str, system: str, metric: str) -> float | None:
    for row in rows:
        if row.get("workload") == workload and row.get("system") == system and row.get("status") == "ok":
            medians = row.get("medians")
            if isinstance(medians, Mapping):
                value = medians.get(metric)
                return float(value) if isinstance(value, int | float) else None
    return None


def judge(goal: Goal, rows: Sequence[Row]) -> Verdict:
    """Compare ``goal.system`` with the strongest of ``goal.peers`` in this session's summary rows."""
    mine = _median(rows, goal.workload, goal.system, goal.metric)
    if not goal.peers:
        if mine is None:
            return Verdict(goal, None, None, None, None, None)
        met = mine <= goal.factor if goal.lower_is_better else mine >= goal.factor
        return Verdict(goal, mine, None, None, mine / goal.factor, met)
    measured = [(p, v) for p in goal.peers if (v := _median(rows, goal.workload, p, goal.metric)) is not None]
    if mine is None or not measured:
        return Verdict(goal, mine, None, None, None, None)
    pick = min if goal.lower_is_better else max
    peer, value = pick(measured, key=lambda item: item[1])
    if value == 0:
        return Verdict(goal, mine, peer, value, None, None)
    ratio = mine / value
    met = ratio <= goal.factor if goal.lower_is_better else ratio >= goal.factor
    return Verdict(goal, mine, peer, value, ratio, met)


def judge_all(rows: Sequence[Row]) -> list[Verdict]:
    return [judge(goal, rows) for goal in GOALS]


def markdown(verdicts: Sequence[Verdict]) -> str:
    """The goal table for a results README."""
    lines = ["| goal | txmq | peer (median) | ratio | needed | met |", "|---|---|---|---|---|---|"]
    for v in verdicts:
        g = v.goal
        unit = "ms" if g.lower_is_better else "msg/s"
        fmt = "{:,.2f}" if g.lower_is_better else "{:,.0f}"
        mine = "-" if v.mine is None else f"{g.system} {fmt.format(v.mine)} {unit}"
        peer = "-" if v.peer is None or v.peer_value is None else f"{v.peer} {fmt.format(v.peer_value)}"
        if not g.peers:
            peer, needed = "(absolute)", f"{'<=' if g.lower_is_better else '>='} {fmt.format(g.factor)}"
        else:
            needed = f"{'<=' if g.lower_is_better else '>='} {g.factor:g}x"
        ratio = "-" if v.ratio is None else f"{v.ratio:.2f}x"
        met = {True: "yes", False: "**no**", None: "not measured"}[v.met]
        lines.append(f"| {g.text} | {mine} | {peer} | {ratio} | {needed} | {met} |")
    return "\n".join(lines)
