"""The PyPI ``rocketmq`` 0.4.4 wheel (bundling the Apache C++ client 2.1.8) against ``txmq broker`` via its
name server: a batch (code 10 + ``batch=1``), ordered sends, a delay level, and an orderly push consumer
(LOCK_BATCH_MQ). The wheel's top-level package clashes with ``rocketmq-python-client``, so it gets its own
virtualenv, built once under a cache directory (``TXMQ_INTEROP_CACHE``, default: the temp directory)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.integration.remoting_support import broker_process

pytestmark = pytest.mark.interop
SCRIPT = Path(__file__).parent / "rocketmq044_script.py"
WHEEL = "rocketmq==0.4.4"


def _venv() -> Path:
    """A virtualenv with the wheel; built in a scratch directory and renamed, so concurrent runs are safe."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the rocketmq 0.4.4 wheel bundles a Linux x86-64 library")
    cache = Path(
        os.environ.get("TXMQ_INTEROP_CACHE") or Path(tempfile.gettempdir()) / f"txmq-interop-{os.getuid()}"
    )
    target = cache / "rocketmq-0.4.4"
    python = target / "bin" / "python"
    if python.exists():
        return python
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=cache, prefix="building-"))
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(scratch)], check=True, capture_output=True, timeout=120
        )
        done = subprocess.run(
            [str(scratch / "bin" / "pip"), "install", "-q", WHEEL],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot install {WHEEL}: {done.stderr[-500:]}")
        try:
            scratch.rename(target)
        except OSError:
            pass  # another run finished first; use its copy
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return python


def test_cpp_client_batch_ordered_delay_and_orderly_consumer(tmp_path: Path) -> None:
    python = _venv()
    with broker_process(tmp_path, "--delay-levels", "200ms 300ms 400ms 500ms") as broker:
        env = {**os.environ, "HOME": str(tmp_path / "home")}
        done = subprocess.run(
            [str(python), str(SCRIPT), broker.namesrv_addr, "CppTopic"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["statuses"] == [0] * 6  # SEND_OK for the batch and the five single sends
    bodies = [m["body"] for m in result["received"]]
    assert sorted(bodies) == sorted([*(f"batch-{i}" for i in range(5)), "ordered-0", "ordered-1", "ordered-2",
                                     "delayed", "normal"])  # fmt: skip
    batch = [m for m in result["received"] if m["body"].startswith("batch-")]
    assert len({m["queueId"] for m in batch}) == 1  # one atomic append to one queue
    ordered = [m["body"] for m in result["received"] if m["body"].startswith("ordered-")]
    assert ordered == ["ordered-0", "ordered-1", "ordered-2"]
