"""``txmq pipeline reconcile`` refuses a SQLite ledger path that does not exist before it starts Spark (it
started a SparkSession, ~45 s, then failed reading the file). A real CLI process."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import PYTHON, subprocess_env


def test_a_missing_sqlite_ledger_is_refused_in_one_line(tmp_path: Path) -> None:
    present = tmp_path / "a.db"
    present.write_bytes(b"")
    missing = tmp_path / "nope" / "b.db"
    result = subprocess.run(
        [PYTHON, "-m", "txmq", "pipeline", "reconcile", "--debits", f"sqlite:///{present}",
         "--credits", f"sqlite:///{missing}"],
        env=subprocess_env(tmp_path / "home"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"no SQLite ledger at {missing}" in lines[0], result.stderr
