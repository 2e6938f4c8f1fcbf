"""A real ``txmq broker`` subprocess for SDK tests: free ports, a private HOME, restartable in place."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PYTHON, START_ATTEMPTS, OutputPump, free_port, port_taken, subprocess_env

FAST_FLAGS = (
    "--transaction-timeout", "500ms", "--transaction-check-interval", "500ms",
    "--delay-levels", "100ms 200ms 300ms",
)  # fmt: skip


def require_remoting_server() -> None:
    """Skip (with a reason) when the broker's remoting door has not been merged into this branch."""
    if importlib.util.find_spec("txmq.server.remoting_server") is None:
        pytest.skip("the remoting server (branch remserver) is not merged yet")


class BrokerProcess:
    def __init__(self, root: Path, *extra: str) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.grpc_port, self.remoting_port, self.namesrv_port = free_port(), free_port(), free_port()
        self.extra = extra
        self.process: subprocess.Popen[str] | None = None
        self.started = False  # once started, a restart keeps the ports
        self.output: OutputPump | None = None

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def remoting(self) -> str:
        return f"127.0.0.1:{self.remoting_port}"

    def start(self) -> None:
        """Start, wait for the ready line; a first start on a port taken meanwhile retries on fresh ports."""
        for _ in range(START_ATTEMPTS):
            output = self._start_once()
            if output is None:
                self.started = True
                return
            if self.started or not port_taken(output):
                break
            self.grpc_port, self.remoting_port, self.namesrv_port = free_port(), free_port(), free_port()
        raise AssertionError(f"the broker did not start: {output[-3000:]}")

    def _start_once(self) -> str | None:
        """None once ready; else the output of a broker that exited or never said it was ready."""
        command = [
            PYTHON, "-m", "txmq", "broker", "--data-dir", str(self.root / "data"),
            "--port", str(self.grpc_port),
            "--remoting-port", str(self.remoting_port), "--namesrv-port", str(self.namesrv_port), *self.extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command,
            env=subprocess_env(self.home),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output = OutputPump(self.process)  # drained for the broker's whole life, not just until ready
        if self.output.wait_for("txmq broker ready on", 30):
            return None
        self.stop()
        return self.output.text()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()
