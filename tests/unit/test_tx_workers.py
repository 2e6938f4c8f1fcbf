"""``_transaction.Workers``, the threads that run a ``TransactionProducer``'s blocking listener calls
(``ThreadPoolExecutor``'s job, cheaper per call): the outcome (result or exception) reaches the
awaiting task, calls run off the loop's thread, at most ``max_workers`` at once on threads started
only when needed, a call cancelled before it starts never runs, ``shutdown`` runs what is queued
and takes nothing new, and a process that never shuts its pool down still exits, after the call
running then has finished."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from txmq.client._transaction import Workers

ROOT = Path(__file__).resolve().parents[2]


async def _call(workers: Workers, fn: Any, *args: Any) -> Any:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    workers.submit(loop, future, fn, args)
    return await future


async def test_results_and_errors_come_back_from_another_thread() -> None:
    workers = Workers(2, "t-workers")
    assert workers.threads == 0  # nothing started before the first call
    loop_thread = threading.get_ident()
    assert await _call(workers, lambda a, b: (a + b, threading.get_ident()), 2, 3) != (5, loop_thread)
    result, ident = await _call(workers, lambda: (7, threading.get_ident()))
    assert result == 7 and ident != loop_thread

    def boom() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError):
        await _call(workers, boom)

    class Stop(BaseException):
        pass

    def stop() -> None:
        raise Stop

    with pytest.raises(Stop):
        await _call(workers, stop)
    assert workers.threads == 1  # one call at a time: one thread was enough
    workers.shutdown()


async def test_at_most_max_workers_run_at_once() -> None:
    workers = Workers(3, "t-workers")
    release = threading.Event()
    lock = threading.Lock()
    running = [0, 0]  # now, most

    def block() -> None:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        assert release.wait(30)
        with lock:
            running[0] -= 1

    calls = [asyncio.ensure_future(_call(workers, block)) for _ in range(7)]
    for _ in range(6000):  # a bound on waiting, not a timing assertion
        await asyncio.sleep(0.01)
        if running[0] == 3:
            break
    assert running[0] == 3 and workers.threads == 3
    release.set()
    await asyncio.gather(*calls)
    assert running[1] == 3 and workers.threads == 3
    workers.shutdown()


async def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    workers = Workers(1, "t-workers")
    release = threading.Event()
    ran: list[str] = []

    def block() -> None:
        assert release.wait(30)
        ran.append("first")

    first = asyncio.ensure_future(_call(workers, block))
    second = asyncio.ensure_future(_call(workers, ran.append, "second"))
    await asyncio.sleep(0.05)
    second.cancel()  # still queued behind ``first`` on the only thread
    with pytest.raises(asyncio.CancelledError):
        await second
    release.set()
    await first
    assert await _call(workers, ran.append, "third") is None
    assert ran == ["first", "third"]
    workers.shutdown()


async def test_shutdown_runs_what_is_queued_and_takes_nothing_new() -> None:
    workers = Workers(1, "t-workers")
    release = threading.Event()
    ran: list[int] = []
    calls = [
        asyncio.ensure_future(_call(workers, lambda i=i: (release.wait(30), ran.append(i)))) for i in range(3)
    ]
    await asyncio.sleep(0.05)
    workers.shutdown()
    with pytest.raises(RuntimeError):
        await _call(workers, ran.append, 99)
    release.set()
    await asyncio.gather(*calls)
    assert ran == [0, 1, 2]
    for thread in threading.enumerate():
        if thread.name.startswith("t-workers"):
            thread.join(30)
            assert not thread.is_alive()


def test_an_unclosed_pool_lets_the_process_exit_after_its_running_call() -> None:
    """No shutdown, a call still running when the main thread ends: the process exits (the worker
    threads are stopped at exit, as concurrent.futures stops its own), the call finished first."""
    script = textwrap.dedent(
        """
        import asyncio, sys, threading, time
        from txmq.client._transaction import Workers

        started = threading.Event()

        def slow():
            started.set()
            time.sleep(0.3)
            print("finished", flush=True)

        async def main():
            workers = Workers(2, "exit-workers")
            loop = asyncio.get_running_loop()
            workers.submit(loop, loop.create_future(), slow, ())
            await loop.run_in_executor(None, started.wait, 30)

        asyncio.run(main())
        print("main done", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["main", "done", "finished"]
