"""The deterministic simulation in CI: many small seeds, every safety count zero, exact replay.

``TXMQ_SIM_SEED=n pytest tests/sim -k replay`` replays one seed (and prints its fault schedule);
``TXMQ_SIM_SEEDS`` sets how many seeds the suite runs (``make soak`` runs 10,000)."""

from __future__ import annotations

import logging
import os

from txmq.testing.sim import SimResult, run_seed
from txmq.testing.soak import Totals

SEEDS = int(os.environ.get("TXMQ_SIM_SEEDS", "200"))
# Seeds that found the bugs of tests/sim/test_regression_*.py: always run, whatever SEEDS is.
FOUND_BUGS = (0, 38, 117, 161, 178, 338)


def _assert_safe(result: SimResult) -> None:
    f = result.figures
    counts = (
        f.lost,
        f.wrongly_visible,
        f.early,
        f.reordered,
        f.phantom,
        f.inconsistent_offsets,
        f.offset_regressions,
    )
    assert counts == (0, 0, 0, 0, 0, 0, 0), result.report()


def test_simulation_seeds(capsys: object) -> None:
    logging.disable(logging.CRITICAL)  # injected faults log errors by design
    try:
        totals = Totals()
        for seed in sorted(set(range(SEEDS)) | set(FOUND_BUGS)):
            result = run_seed(seed)
            totals.add(result)
            _assert_safe(result)
    finally:
        logging.disable(logging.NOTSET)
    print("\n" + totals.summary())
    assert totals.seeds >= SEEDS
    assert totals.acknowledged > 0
    assert sum(totals.faults.values()) > 0


def test_replay_same_seed_same_history() -> None:
    seed = int(os.environ.get("TXMQ_SIM_SEED", "7"))
    logging.disable(logging.CRITICAL)
    try:
        first, second = run_seed(seed), run_seed(seed)
    finally:
        logging.disable(logging.NOTSET)
    print("\n" + first.report())
    assert first.history_hash == second.history_hash
    assert first.history == second.history
    _assert_safe(first)


def test_different_seeds_differ() -> None:
    logging.disable(logging.CRITICAL)
    try:
        assert run_seed(1).history_hash != run_seed(2).history_hash
    finally:
        logging.disable(logging.NOTSET)
