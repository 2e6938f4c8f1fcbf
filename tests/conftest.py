"""Shared fixtures: subprocess environments that use this checkout's sources and a private HOME."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from txmq.common.ports import free_port as free_port  # re-exported: tests and benchmarks import it from here

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"


def subprocess_env(home: Path) -> dict[str, str]:
    """Environment for a child ``python -m txmq ...``: this checkout's sources, a private HOME."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env["HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


PYTHON = sys.executable


@pytest.fixture
def home_dir(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home
