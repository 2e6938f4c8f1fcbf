"""The Node.js packages the interop tests drive (``tests/interop/node``), installed on first use."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parent / "node"


def node_with(package: str, test: str) -> Path:
    """The ``node`` binary, once ``package`` is installed under NODE_DIR; skips ``test`` without node
    and npm or when ``npm install`` fails."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(f"node and npm are needed for the {test} interop test")
    if not (NODE_DIR / "node_modules" / package).is_dir():
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.skip(f"npm install {package} failed: {done.stderr[-500:]}")
    return Path(node)
