"""One process per data directory: a second ``txmq broker`` on a running broker's data directory, and
``txmq store verify|repair`` on its store, are refused in one line (the second broker used to start
and append to the same CommitLog; repair could truncate a log being written). Real processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import PYTHON, free_port, subprocess_env

from .grpc_harness import BrokerProcess


def _txmq(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "txmq", *args], env=subprocess_env(home), capture_output=True, text=True, timeout=60
    )


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_second_broker_and_store_commands_are_refused_while_a_broker_runs(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "first")
    broker.start()
    try:
        ports = [
            "--port",
            str(free_port()),
            "--remoting-port",
            str(free_port()),
            "--namesrv-port",
            str(free_port()),
        ]
        second = _txmq(broker.home, "broker", "--data-dir", str(broker.data_dir), *ports)
        assert "ready on" not in second.stdout
        assert "in use by another txmq process" in _one_error_line(second)
        store_dir = str(broker.data_dir / "store")
        for command in (["verify"], ["repair", "--yes"]):
            refused = _txmq(broker.home, "store", *command, "--data-dir", store_dir)
            assert "in use by another txmq process" in _one_error_line(refused)
    finally:
        broker.stop()
    # stopped (cleanly or not, the kernel drops the lock with the process): both work again
    assert _txmq(broker.home, "store", "verify", "--data-dir", str(broker.data_dir / "store")).returncode == 0
    broker.start()
    broker.stop()
