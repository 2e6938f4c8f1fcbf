"""A ``txmq broker`` subprocess on free ports, and the official RocketMQ 5 Python client loaded with a
private HOME (it writes its log folder there at import time)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..conftest import PYTHON, START_ATTEMPTS, free_port, port_taken, subprocess_env

READY = "txmq broker ready on"
START_TIMEOUT_S = 30.0


class BrokerProcess:
    """One broker; ``restart()`` keeps its data dir and ports."""

    def __init__(
        self, root: Path, *, extra_args: list[str] | None = None, config: dict[str, Any] | None = None
    ):
        self.root = root
        self.data_dir = root / "data"
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.remoting_port = free_port()
        self.namesrv_port = free_port()
        self.extra_args = list(extra_args or [])
        self.config_file: Path | None = None
        if config:
            self.config_file = root / "broker.json"
            self.config_file.write_text(json.dumps(config))
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.started = False  # once started, a restart keeps the ports

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [
            PYTHON, "-m", "txmq", "broker", "--data-dir", str(self.data_dir), "--port", str(self.port),
            "--remoting-port", str(self.remoting_port), "--namesrv-port", str(self.namesrv_port),
        ]  # fmt: skip
        if self.config_file is not None:
            args += ["--config", str(self.config_file)]
        return args + self.extra_args

    def start(self) -> None:
        """Start, wait for the ready line; a first start on a port taken meanwhile retries on fresh ports."""
        for _ in range(START_ATTEMPTS):
            failure = self._start_once()
            if failure is None:
                self.started = True
                return
            if self.started or not port_taken("".join(self.output[-50:])):
                break
            self.port, self.remoting_port, self.namesrv_port = free_port(), free_port(), free_port()
        raise RuntimeError(failure + "".join(self.output[-50:]))

    def _start_once(self) -> str | None:
        """None once ready; else why not (the output is in ``self.output``)."""
        self.proc = subprocess.Popen(
            self.command(),
            env=subprocess_env(self.home),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc, lines), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                self.stop()  # reaps the exited process
                return "the broker exited before it was ready:\n"
            if READY in line:
                return None
        self.stop()
        return "the broker did not become ready:\n"

    def _pump(self, proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.output.append(line)
            lines.put(line)
        lines.put(None)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def admin(self, op: str, args: dict[str, Any] | None = None) -> Any:
        from txmq.cli.admin_client import call

        return call(self.endpoint, op, args)


_client: Any = None


def official_client(home: Path) -> Any:
    """The ``rocketmq`` package (rocketmq-python-client 5.1.2), imported with HOME pointing at ``home``."""
    global _client
    if _client is None:
        previous = os.environ.get("HOME")
        os.environ["HOME"] = str(home)
        try:
            _client = importlib.import_module("rocketmq")
        finally:
            if previous is not None:
                os.environ["HOME"] = previous
    return _client


class Clients:
    """Creates official clients against one broker and shuts them all down at the end."""

    def __init__(self, rmq: Any, endpoint: str) -> None:
        self.rmq = rmq
        self.endpoint = endpoint
        self._started: list[Any] = []

    def config(self) -> Any:
        return self.rmq.ClientConfiguration(self.endpoint, self.rmq.Credentials(), request_timeout=5)

    def producer(self, *topics: str, checker: Any = None) -> Any:
        producer = self.rmq.Producer(self.config(), topics, checker)
        return self._start(producer)

    def simple(self, group: str, topic: str, expression: str = "*", await_s: int = 2) -> Any:
        subscription = {topic: self.rmq.FilterExpression(expression)}
        return self._start(self.rmq.SimpleConsumer(self.config(), group, subscription, await_s))

    def push(self, group: str, topic: str, listener: Any, expression: str = "*") -> Any:
        subscription = {topic: self.rmq.FilterExpression(expression)}
        return self._start(self.rmq.PushConsumer(self.config(), group, listener, subscription))

    def _start(self, client: Any) -> Any:
        client.startup()
        self._started.append(client)
        return client

    def close(self) -> None:
        for client in reversed(self._started):
            with contextlib.suppress(Exception):
                client.shutdown()
        self._started.clear()


def receive_all(
    consumer: Any, count: int, *, timeout_s: float = 60.0, invisible_s: int = 20, ack: bool = True
) -> list[Any]:
    """Receive (and ack) until ``count`` messages arrived or the timeout passed."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.receive(32, invisible_s):
            got.append(message)
            if ack:
                consumer.ack(message)
    return got
