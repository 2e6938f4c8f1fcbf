"""CPU used by the server processes and by this (client) process over a measurement window."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

import psutil


def _cpu_seconds(proc: psutil.Process) -> float | None:
    try:
        times = proc.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return float(times.user + times.system)


class CpuMeter:
    """Percent of one core used between ``start()`` and ``stop()``: 100 = one core fully busy."""

    def __init__(self, server_pids: Iterable[int], client_pids: Iterable[int] = ()) -> None:
        """``client_pids``: helper processes of the client (e.g. producer workers), counted with this one."""
        self._servers = [psutil.Process(pid) for pid in server_pids if psutil.pid_exists(pid)]
        self._clients = [psutil.Process(os.getpid())]
        self._clients += [psutil.Process(pid) for pid in client_pids if psutil.pid_exists(pid)]
        self._t0 = 0.0
        self._server0: list[float | None] = []
        self._client0 = 0.0

    def _client_seconds(self) -> float:
        return sum(_cpu_seconds(p) or 0.0 for p in self._clients)

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._server0 = [_cpu_seconds(p) for p in self._servers]
        self._client0 = self._client_seconds()

    def stop(self) -> dict[str, float | None]:
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        server_total: float | None = None
        for proc, before in zip(self._servers, self._server0, strict=True):
            after = _cpu_seconds(proc)
            if before is not None and after is not None:
                server_total = (server_total or 0.0) + after - before
        client = self._client_seconds() - self._client0
        return {
            "server_pct": None if server_total is None else 100.0 * server_total / elapsed,
            "client_pct": 100.0 * client / elapsed,
        }


def find_pids(name: str) -> list[int]:
    """Pids of running processes called ``name`` (for shared services such as RabbitMQ or NATS)."""
    pids = []
    for proc in psutil.process_iter(["name"]):
        if proc.info.get("name") == name:
            pids.append(proc.pid)
    return pids
