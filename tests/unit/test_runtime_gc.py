"""The broker process's collector settings (``runtime.tune_gc``), checked in a child process: they are
process-wide, so this test process keeps its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_env

CHILD = """
import gc
from txmq.server import runtime
before = gc.get_threshold()
runtime.tune_gc()
print(before[0], gc.get_threshold()[0], gc.get_threshold()[1:] == before[1:], gc.get_freeze_count())
"""


def test_tune_gc_freezes_startup_objects_and_raises_the_young_threshold(tmp_path: Path) -> None:
    env = subprocess_env(tmp_path)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    words = out.stdout.split()
    before, after, older_unchanged, frozen = int(words[0]), int(words[1]), words[2], int(words[3])
    assert before == 700  # CPython's default: the child starts untuned
    assert after == 50_000
    assert older_unchanged == "True"
    assert frozen > 1000  # the modules' objects, at least
