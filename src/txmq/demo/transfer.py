"""``txmq demo transfer``: two banks, one broker, injected faults, and the invariants at the end.

The orchestrator starts a broker (embedded file store, sync flush, 1 s transaction timeout and check
interval so orphans resolve quickly), bank A (transactional producer) and bank B (idempotent consumer)
as separate processes, restarts whatever dies, kills the broker with SIGKILL once mid-run, then checks:
money conserved, every debited transfer credited exactly once, nothing credited that was not debited,
and how long orphaned transactions (producer killed after its local commit) took to resolve.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from txmq.client.idempotency import Deduplicator
from txmq.client.txtable import TransactionTable
from txmq.common.ports import free_port
from txmq.demo import bank
from txmq.demo.services import CONSUMER_GROUP, TOPIC, transfer_of

READY = "txmq broker ready on"


class Process:
    """A child process whose stdout lines arrive on a queue."""

    def __init__(self, name: str, args: list[str], lines: queue.Queue[tuple[str, str | None]]) -> None:
        self.name = name
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._pump, args=(lines,), daemon=True)
        self._thread.start()

    def _pump(self, lines: queue.Queue[tuple[str, str | None]]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            lines.put((self.name, line.rstrip("\n")))
        lines.put((self.name, None))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Report:
    transfers: int
    committed: int = 0
    rolled_back: int = 0
    unknown_answers: int = 0
    producer_crashes: int = 0
    consumer_crashes: int = 0
    broker_kills: int = 0
    orphan_resolve_ms: list[int] = field(default_factory=list)
    verdict: bank.Verdict | None = None
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        v = self.verdict or bank.Verdict()
        return {
            "transfers": self.transfers, "committed_locally": self.committed, "rolled_back": self.rolled_back,
            "decisions_left_unknown": self.unknown_answers,
            "producer_crashes_after_commit": self.producer_crashes,
            "consumer_crashes_mid_batch": self.consumer_crashes, "broker_kills": self.broker_kills,
            "debited": v.debited, "credited": v.credited, "money_before": v.money_before,
            "money_after": v.money_after, "money_conserved": v.conserved, "not_credited": v.not_credited,
            "credited_twice": v.credited_twice, "credited_without_debit": v.credited_without_debit,
            "orphan_resolve_ms_max": max(self.orphan_resolve_ms, default=0),
            "orphans": len(self.orphan_resolve_ms), "seconds": round(self.seconds, 1), "ok": v.ok,
        }  # fmt: skip


class Demo:
    def __init__(self, data_dir: Path, transfers: int, seed: int, db_url: str | None, faults: bool) -> None:
        self.data_dir = data_dir
        self.transfers = transfers
        self.seed = seed
        self.faults = faults
        self.lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.ports = {"grpc": free_port(), "remoting": free_port(), "namesrv": free_port()}
        self.db_a = db_url or f"sqlite:///{data_dir / 'bank_a.db'}"
        self.db_b = db_url or f"sqlite:///{data_dir / 'bank_b.db'}"
        self.report = Report(transfers)
        self.broker: Process | None = None
        self.crash_times: dict[int, int] = {}

    @property
    def endpoints(self) -> str:
        return f"127.0.0.1:{self.ports['namesrv']}"

    def start_broker(self) -> None:
        args = [
            sys.executable, "-m", "txmq", "broker", "--data-dir", str(self.data_dir / "broker"),
            "--port", str(self.ports["grpc"]), "--remoting-port", str(self.ports["remoting"]),
            "--namesrv-port", str(self.ports["namesrv"]), "--flush", "sync",
            "--transaction-timeout", "1s", "--transaction-check-interval", "1s",
        ]  # fmt: skip
        broker_lines: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self.broker = Process("broker", args, broker_lines)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                _, line = broker_lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError("the broker exited before it was ready")
            if READY in line:
                return
        raise RuntimeError("the broker did not become ready within 60 s")

    def service(self, which: str, **options: Any) -> Process:
        args = [sys.executable, "-m", "txmq.demo.services", which, "--endpoints", self.endpoints,
                "--db", self.db_a if which == "a" else self.db_b, "--seed", str(self.seed),
                "--count", str(self.transfers), "--faults" if self.faults else "--no-faults"]  # fmt: skip
        for key, value in options.items():
            args += [f"--{key.replace('_', '-')}", str(value)]
        return Process(which, args, self.lines)

    def prepare(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        engine_a, engine_b = sa.create_engine(self.db_a), sa.create_engine(self.db_b)
        bank.create(engine_a, engine_b)
        for table in (TransactionTable(engine_a), Deduplicator(engine_b, consumer_group=CONSUMER_GROUP)):
            table.drop_schema()
            table.create_schema()
        self.start_broker()
        from txmq.cli.admin_client import call

        call(f"127.0.0.1:{self.ports['grpc']}", "topic.create", {"name": TOPIC, "queues": 4})

    def run(self) -> Report:
        started = time.monotonic()
        self.prepare()
        consumer, incarnation = self.service("b"), 0
        producer, finished, next_index = self.service("a"), False, 0
        kill_at = self.transfers * 2 // 5 if self.faults else -1
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and not (finished and self._settled()):
                try:
                    name, line = self.lines.get(timeout=0.5)
                except queue.Empty:
                    continue
                if name == "a" and line is not None:
                    next_index = self._on_producer_line(line, next_index)
                    finished = finished or line == "FINISHED"
                    if next_index == kill_at and self.broker is not None:
                        kill_at = -1
                        self._kill_broker()
                elif name == "a" and not finished:  # bank A died (after a local commit): restart it
                    self.report.producer_crashes += 1
                    producer = self.service("a", start=next_index)
                elif name == "b" and line is None:  # bank B died mid-batch: restart it
                    self.report.consumer_crashes += 1
                    incarnation += 1
                    consumer = self.service("b", incarnation=incarnation)
        finally:
            for process in (producer, consumer, self.broker):
                if process is not None:
                    process.stop()
        self.report.verdict = bank.verdict(sa.create_engine(self.db_a), sa.create_engine(self.db_b))
        credited = bank.credit_times(
            sa.create_engine(self.db_b), [transfer_of(self.seed, i)["id"] for i in self.crash_times]
        )
        self.report.orphan_resolve_ms = [
            credited[transfer_of(self.seed, i)["id"]] - at
            for i, at in self.crash_times.items()
            if transfer_of(self.seed, i)["id"] in credited
        ]
        self.report.seconds = time.monotonic() - started
        return self.report

    def _on_producer_line(self, line: str, next_index: int) -> int:
        parts = line.split()
        if parts[:1] == ["DONE"]:
            state = parts[2]
            if state == "COMMIT_MESSAGE":
                self.report.committed += 1
            elif state == "ROLLBACK_MESSAGE":
                self.report.rolled_back += 1
            else:
                self.report.unknown_answers += 1
            return int(parts[1]) + 1
        if parts[:1] == ["CRASH"]:
            self.report.committed += 1
            self.crash_times[int(parts[1])] = int(parts[2])
            return int(parts[1]) + 1
        return next_index

    def _kill_broker(self) -> None:
        assert self.broker is not None
        self.broker.stop(signal.SIGKILL)
        self.report.broker_kills += 1
        self.start_broker()

    def _settled(self) -> bool:
        verdict = bank.verdict(sa.create_engine(self.db_a), sa.create_engine(self.db_b))
        return not verdict.not_credited and verdict.debited >= self.report.committed


def run_transfer_demo(
    data_dir: str, transfers: int, seed: int, db_url: str | None, faults: bool, json_out: bool
) -> int:
    """Run the demo; print the invariants; 0 when every one holds."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    report = Demo(Path(data_dir).resolve(), transfers, seed, db_url, faults).run()
    summary = report.as_dict()
    if json_out:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(report)
    return 0 if summary["ok"] else 1


def _print_summary(report: Report) -> None:
    v = report.verdict or bank.Verdict()
    marks = {True: "holds", False: "BROKEN"}
    once = not v.not_credited and not v.credited_twice
    lines = [
        f"transfers {report.transfers}: {report.committed} committed locally, "
        f"{report.rolled_back} rolled back",
        f"faults: {report.producer_crashes} producer crashes after commit, {report.unknown_answers} lost "
        f"decisions, {report.consumer_crashes} consumer crashes, {report.broker_kills} broker kill -9",
        f"money conserved ({v.money_before} -> {v.money_after}): {marks[v.conserved]}",
        f"every committed transfer credited exactly once: {marks[once]} ({v.debited} debited, "
        f"{v.credited} credited)",
        f"no rolled-back transfer credited: {marks[not v.credited_without_debit]}",
        f"orphans resolved by check-back: {len(report.orphan_resolve_ms)}, "
        f"slowest {max(report.orphan_resolve_ms, default=0)} ms",
        f"all invariants: {marks[v.ok]} ({report.seconds:.1f} s)",
    ]
    print("\n".join(lines))
