"""Shared fixtures: subprocess environments that use this checkout's sources and a private HOME."""

from __future__ import annotations

import os

# Before anything imports grpc: with gRPC's fork support on, a fork() while gRPC threads are busy (the
# official client's and our channels from earlier modules) breaks the child; pyspark launches its JVM
# with preexec_fn, i.e. fork(), and the session fixture failed "Java gateway process exited before
# sending its port number" (2 of 3 launches with busy gRPC threads; 0 of 3 with this off).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

import asyncio
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from txmq.common.ports import free_port as free_port  # re-exported: tests and benchmarks import it from here

# Property tests judge answers, never time: Hypothesis's per-example deadline (200 ms) and its "generation
# too slow" check failed correct code on a loaded 2-core host (load average 13-15, session 28). A test's own
# @settings still sets what it names; these defaults fill in the rest.
settings.register_profile("txmq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("txmq")

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

START_ATTEMPTS = 5


def port_taken(output: str) -> bool:
    """Whether a child broker or name server exited because a port it was given is taken.

    ``free_port()`` checks a port is free, the child binds it a second or two later: another process on
    this host (a parallel test run, a benchmark) can take it in between. The harnesses then pick fresh
    ports and start again (``START_ATTEMPTS``); a restart keeps its ports, clients are bound to them.
    """
    return "address already in use" in output.lower()


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop for a module's tests that drive a broker in process by ``run_until_complete``
    (Hypothesis examples share the module's brokers, so they share its loop)."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def home_dir(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


class OutputPump:
    """Reads a child's output on a thread for as long as it runs.

    A child whose stdout/stderr pipe nobody reads blocks in ``write`` once the pipe holds 64 KiB: a
    broker logging warnings through a long test would then hang every request. Lines are kept here.
    """

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        streams = [s for s in (process.stdout, process.stderr) if s is not None]
        self._open = len(streams)
        for stream in streams:
            threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)
            self._queue.put(line)
        stream.close()  # type: ignore[attr-defined]  # at EOF: nothing else reads it (no unclosed-pipe warning)
        self._queue.put(None)

    def wait_for(self, needle: str, timeout_s: float) -> bool:
        """True once a line containing ``needle`` was printed; False if the child closed its output first
        or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while self._open and time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if line is None:
                self._open -= 1
            elif needle in line:
                return True
        return False

    def text(self, last: int = 3000) -> str:
        return "".join(self.lines)[-last:]
