"""CPU per message of the compare harness's txmq driver, client and broker, for a fixed count.

Runs the harness's own ``TxmqDriver`` (a private broker subprocess, the SDK in this process) and the
runner's slot loop (``runner.drive_slot``) for exactly ``--requests`` requests per slot, so the
work is the same as ``txmq bench compare`` does for the workload, without its clock:

* ``batch-100``: one slot, each request ``Producer.send_batch`` of 100 x 1 KB (sync flush);
* ``async-256``: 256 slots, each request one ``Producer.send`` of 1 KB (async flush).

Prints msg/s and CPU microseconds per message of this process (the SDK and the event loop) and of the
broker (psutil). For instruction counts run it under ``valgrind --tool=callgrind`` at two counts and
divide the difference (the broker child is not traced)::

    PYTHONPATH=src python benchmarks/peers_cost.py --workload async-256 --requests 40 [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_NS = 1_000_000_000


async def _round(workload_name: str, requests: int, driver: object, workload: object) -> str:
    import psutil

    from benchmarks.harness.runner import drive_slot

    producer = await driver.producer(0)  # type: ignore[attr-defined]
    try:
        far = time.perf_counter_ns() + 3600 * _NS
        slots = workload.in_flight  # type: ignore[attr-defined]
        # warm-up: routes, connection, first sends (not measured)
        await asyncio.gather(*(drive_slot(producer, _counted(workload, 2), s, 0, 0, 0) for s in range(slots)))
        broker = psutil.Process(driver.server_pids()[0])  # type: ignore[attr-defined]
        b0 = broker.cpu_times()
        sampler = None
        if os.environ.get("PEERS_STATES"):  # an experiment's probe: how often both processes run
            sampler = await asyncio.create_subprocess_exec(
                sys.executable, os.environ["PEERS_STATES"], str(os.getpid()), str(broker.pid), "2"
            )
        c0, t0 = time.process_time(), time.perf_counter()
        outcomes = await asyncio.gather(
            *(drive_slot(producer, _counted(workload, requests), s, 0, far, 0) for s in range(slots))
        )
        if sampler is not None:
            await sampler.wait()
        elapsed, client = time.perf_counter() - t0, time.process_time() - c0
        b1 = broker.cpu_times()
    finally:
        await producer.close()
    n = sum(o.acked_total for o in outcomes)
    broker_s = (b1.user + b1.system) - (b0.user + b0.system)
    return (
        f"{workload_name:<10} {n:7d} msgs {n / elapsed:9,.0f} msg/s  CPU/msg client "
        f"{client / n * 1e6:6.2f} us  broker {broker_s / n * 1e6:6.2f} us"
    )


def _counted(workload: Any, requests: int) -> Any:
    """The workload whose slot loop stops after ``requests`` requests (see ``_CountingWorkload``)."""
    return _CountingWorkload(workload, requests)


class _CountingWorkload:
    """Quacks like a Workload for ``_produce_slot``; its ``message_bytes``/``batch``/``queues`` are the
    workload's. The slot stops on the deadline: we give a far one and stop it by count instead."""

    def __init__(self, workload: object, requests: int) -> None:
        self._w = workload
        self.requests = requests
        # the fields the slot loop reads per request, copied: through ``__getattr__`` each read would first
        # raise and catch an AttributeError (~2.4k instructions) and count as client work
        for field in dataclasses.fields(workload):  # type: ignore[arg-type]
            setattr(self, field.name, getattr(workload, field.name))

    def __getattr__(self, name: str) -> object:
        return getattr(self._w, name)


async def main_async(args: argparse.Namespace) -> None:
    from benchmarks.harness import runner
    from benchmarks.harness.drivers.txmq import TxmqDriver
    from benchmarks.harness.workload import STANDARD_WORKLOADS
    from txmq import native

    print(native.summary(), flush=True)
    workload = STANDARD_WORKLOADS[args.workload]
    flush = "async" if workload.durability == "async" else "sync"
    driver = TxmqDriver(flush=flush)  # type: ignore[arg-type]
    original = runner._produce_slot

    async def counted_slot(producer, wl, rec, first_queue, interval_ns):  # type: ignore[no-untyped-def]
        # the runner's loop, stopped after ``wl.requests`` requests: wrap send to count them
        left = [wl.requests]

        class _Stop(Exception):
            pass

        class _Counting:
            async def close(self) -> None:
                pass

            async def send(self, queue: int, payloads: object) -> None:
                if left[0] <= 0:
                    raise _Stop
                left[0] -= 1
                await producer.send(queue, payloads)

        try:
            await original(_Counting(), wl, rec, first_queue, interval_ns)
        except _Stop:
            return

    runner._produce_slot = counted_slot
    await driver.setup(workload)
    try:
        for _ in range(args.rounds):
            print(await _round(args.workload, args.requests, driver, workload), flush=True)
    finally:
        await driver.teardown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=["batch-100", "async-256"], default="async-256")
    parser.add_argument("--requests", type=int, default=40, help="requests per slot")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = parser.parse_args()
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(main_async(args))
    else:
        asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
