"""``txmq broker --config FILE``: the file's settings hold unless an option is given on the command line
(options left at their defaults used to override the whole file), and ``--prealloc-bytes`` reaches the
store. Real broker processes."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, OutputPump, free_port, subprocess_env


def _run_until_ready(tmp_path: Path, *args: str) -> str:
    """Start ``txmq broker`` with ``args``, wait for its ready line, stop it; return its output."""
    process = subprocess.Popen(
        [PYTHON, "-m", "txmq", "broker", *args],
        cwd=tmp_path,
        env=subprocess_env(tmp_path / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = OutputPump(process)
    try:
        ready = output.wait_for("txmq broker ready on", 60)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert ready, output.text()
    return output.text()


def _config(tmp_path: Path, **settings: object) -> Path:
    path = tmp_path / "broker.json"
    path.write_text(json.dumps(settings))
    return path


def test_the_config_files_ports_and_data_dir_are_used_when_no_option_names_them(tmp_path: Path) -> None:
    grpc, remoting, namesrv = free_port(), free_port(), free_port()
    data_dir = str(tmp_path / "from-file")
    config = _config(
        tmp_path, data_dir=data_dir, grpc_port=grpc, remoting_port=remoting, namesrv_port=namesrv
    )
    output = _run_until_ready(tmp_path, "--config", str(config))
    assert f"ready on 127.0.0.1:{grpc}" in output
    assert (tmp_path / "from-file" / "store").is_dir()
    assert not (tmp_path / "txmq-data").exists()  # the option's default did not override the file


def test_an_option_given_on_the_command_line_wins_over_the_file(tmp_path: Path) -> None:
    grpc, other, remoting, namesrv = free_port(), free_port(), free_port(), free_port()
    config = _config(tmp_path, grpc_port=grpc, remoting_port=remoting, namesrv_port=namesrv)
    output = _run_until_ready(tmp_path, "--config", str(config), "--port", str(other), "--data-dir", "d")
    assert f"ready on 127.0.0.1:{other}" in output


def _commitlog_bytes(data_dir: Path) -> int:
    return sum(path.stat().st_size for path in (data_dir / "store" / "commitlog").iterdir())


def test_prealloc_bytes_sets_the_zeros_kept_ahead_and_zero_turns_them_off(tmp_path: Path) -> None:
    ports = ("--port", str(free_port()), "--remoting-port", str(free_port()))
    ports += ("--namesrv-port", str(free_port()))
    _run_until_ready(tmp_path, "--data-dir", "big", "--prealloc-bytes", str(4 * 1024 * 1024), *ports)
    _run_until_ready(tmp_path, "--data-dir", "off", "--prealloc-bytes", "0", *ports)
    assert _commitlog_bytes(tmp_path / "big") >= 4 * 1024 * 1024
    assert _commitlog_bytes(tmp_path / "off") < 1024 * 1024  # the default would have made 1 MiB


def test_a_negative_prealloc_is_refused_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [PYTHON, "-m", "txmq", "broker", "--data-dir", "d", "--prealloc-bytes", "-1"],
        cwd=tmp_path,
        env=subprocess_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "preallocation must be 0 (off) or more bytes, got -1" in result.stderr + result.stdout
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "cannot read config file"),
        ("{bad", "cannot read config file"),
        ('{"nosuch": 1}', "unknown setting 'nosuch'"),
        ('{"flush": "bogus"}', "setting 'flush' in"),
        ('{"grpc_port": "abc"}', "setting 'grpc_port' in"),
        ('{"delay_levels": 5}', "setting 'delay_levels' in"),
        ('{"transaction_timeout": "xyz"}', "setting 'transaction_timeout' in"),
        ('{"retry_backoff_ms": ["1s"]}', "setting 'retry_backoff_ms' in"),
    ],
    ids=["missing", "malformed", "unknown-key", "bad-flush", "port-not-int", "levels-not-str",
         "bad-duration", "backoff-not-ints"],
)  # fmt: skip
def test_a_bad_config_file_is_refused_in_one_line(tmp_path: Path, content: str | None, reason: str) -> None:
    """Each used to end in a Python traceback (or reach the broker mistyped) instead of DESIGN §6's
    non-zero exit with a one-line reason."""
    path = tmp_path / "broker.json"
    if content is not None:
        path.write_text(content)
    ports = ("--port", str(free_port()), "--remoting-port", str(free_port()))
    ports += ("--namesrv-port", str(free_port()))
    result = subprocess.run(
        [PYTHON, "-m", "txmq", "broker", "--data-dir", "d", "--config", str(path), *ports],
        cwd=tmp_path,
        env=subprocess_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and reason in lines[0], result.stderr
    assert "ready on" not in result.stdout
