"""The transfer demo's invariants hold over several seeds (short runs, every fault injected)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, subprocess_env


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_transfer_demo_invariants_hold(tmp_path: Path, home_dir: Path, seed: int) -> None:
    result = subprocess.run(
        [PYTHON, "-m", "txmq", "demo", "transfer", "--data-dir", str(tmp_path / "demo"), "--transfers", "80",
         "--seed", str(seed), "--json"],
        env=subprocess_env(home_dir), capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = json.loads(result.stdout[result.stdout.index("{") :])
    assert figures["ok"] and figures["money_conserved"]
    assert figures["not_credited"] == figures["credited_twice"] == figures["credited_without_debit"] == []
    assert figures["debited"] == figures["credited"] > 0
    assert figures["broker_kills"] == 1
