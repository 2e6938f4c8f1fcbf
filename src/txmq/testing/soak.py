"""Figures over many simulation seeds, and the ``make soak`` entry point:

python -m txmq.testing.soak --seeds 10000 [--budget-s 600]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from txmq.testing.sim import SimResult, run_seed


@dataclass
class Totals:
    seeds: int = 0
    failing: list[int] = field(default_factory=list)
    acknowledged: int = 0
    expected: int = 0
    lost: int = 0
    wrongly_visible: int = 0
    early: int = 0
    reordered: int = 0
    duplicates: Counter[str] = field(default_factory=Counter)
    consumed: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    simulated_ms: int = 0

    def add(self, result: SimResult) -> None:
        f = result.figures
        self.seeds += 1
        if not f.ok:
            self.failing.append(result.seed)
        self.acknowledged += f.acknowledged
        self.expected += f.expected
        self.lost += f.lost
        self.wrongly_visible += f.wrongly_visible
        self.early += f.early
        self.reordered += f.reordered
        self.duplicates.update(f.duplicates)
        self.consumed.update(f.consumed)
        self.simulated_ms += result.simulated_ms
        for line in result.faults:
            self.faults[line.split(": ", 1)[1].split()[0].rstrip(":")] += 1
        self.faults.update(result.counters)

    def summary(self) -> str:
        faults = ", ".join(f"{k}={v}" for k, v in sorted(self.faults.items()))
        return (
            f"simulation: seeds={self.seeds} failing_seeds={len(self.failing)} {self.failing[:10]}\n"
            f"  faults injected={sum(self.faults.values())} ({faults})\n"
            f"  acknowledged={self.acknowledged} expected_visible={self.expected} lost={self.lost} "
            f"wrongly_visible={self.wrongly_visible} early={self.early} reordered={self.reordered}\n"
            f"  consumed per group={dict(sorted(self.consumed.items()))}\n"
            f"  duplicates per group={dict(sorted(self.duplicates.items()))}\n"
            f"  simulated time={self.simulated_ms / 1000:.0f} s"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run many deterministic simulation seeds")
    parser.add_argument("--seeds", type=int, default=10_000)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=0.0, help="stop after this many seconds (0: none)")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    totals = Totals()
    started = time.monotonic()
    for seed in range(args.first, args.first + args.seeds):
        result = run_seed(seed)
        totals.add(result)
        if not result.figures.ok:
            print(result.report(), file=sys.stderr)
        if args.budget_s and time.monotonic() - started > args.budget_s:
            break
    print(totals.summary())
    print(f"  wall time={time.monotonic() - started:.1f} s")
    return 1 if totals.failing else 0


if __name__ == "__main__":
    raise SystemExit(main())
