"""CPU per consumed message of the compare harness's consume-256 workload, client and broker.

Runs the harness's own ``TxmqDriver`` (a private ``--flush sync`` broker subprocess) and consumes
with the driver's consumer and the runner's ``on_receive``, exactly as ``txmq bench run consume-256``
does, but for a fixed count: ``--preload`` messages (1 KiB, the runner's ``_preload``: batches of
100 from 4 slots) are stored first by a child process (not traced, so the preload costs this process
nothing), then this process consumes ``--consume`` of them in pulls of 256 (pull, then the commit
of the new position, per batch) and stops.

Prints msg/s and CPU microseconds per consumed message of this process and of the broker (psutil).
For instruction counts run it under callgrind at two ``--consume`` counts with the same ``--preload``
and divide the difference; ``--broker-callgrind OUT`` runs the broker under callgrind too, and both
processes then dump the consume loop alone to ``<out>.1`` (see ``_Marks``)::

    PYTHONPATH=<tree>/src:<tree> valgrind --tool=callgrind --callgrind-out-file=/tmp/client.out \\
        <tree>/.venv/bin/python benchmarks/consume_cost.py --consume 5120 --preload 20480 \\
        --broker-callgrind /tmp/broker.out
    # per message = (I(--consume 20480) - I(--consume 5120)) / 15360, client and broker alike

``benchmarks/consume_cg.sh TREE N TAG`` does that for one tree. ``<tree>`` first on PYTHONPATH: the
driver, runner and SDK are that tree's (this script only orchestrates), so a base tree is measured
with its own harness code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: a tree named there wins


async def _preload_child(endpoint: str, count: int) -> None:
    from benchmarks.harness import runner
    from benchmarks.harness.drivers.txmq import TOPIC, _TxmqProducer
    from benchmarks.harness.workload import STANDARD_WORKLOADS
    from txmq.client import Producer

    workload = STANDARD_WORKLOADS["consume-256"].scaled(preload_messages=count)
    client = Producer(endpoint, group="bench-p0", transport="remoting", max_in_flight=64)
    await client.start()
    queues = sorted(await client.transport.route(TOPIC, for_write=True), key=lambda q: q.queue_id)
    producer = _TxmqProducer(client, queues)
    try:
        await runner._preload([producer], workload)  # type: ignore[list-item]
    finally:
        await producer.close()


_MARKS_C = """
#include <valgrind/callgrind.h>
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *what) { CALLGRIND_DUMP_STATS_AT(what); }
"""


class _Marks:
    """Callgrind's counters zeroed right before the consume loop and dumped right after it, in this
    process (client requests through a small C helper built here; no-ops outside valgrind) and in the
    broker (``callgrind_control``), so the start-up (which polls while a traced broker starts) and the
    teardown are not counted: the dumps hold the consumption only (a ``<out>.1`` file beside each
    ``--callgrind-out-file``)."""

    def __init__(self, broker_pid: int) -> None:
        import ctypes
        import subprocess
        import tempfile

        self.broker_pid = broker_pid
        self.run = subprocess.run
        folder = tempfile.mkdtemp(prefix="cgmarks-")
        source, lib = Path(folder, "marks.c"), Path(folder, "marks.so")
        source.write_text(_MARKS_C)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
        self.lib = ctypes.CDLL(str(lib))

    def zero(self) -> None:
        self.run(["callgrind_control", "-z", str(self.broker_pid)], check=True, capture_output=True)
        self.lib.cg_zero()

    def dump(self) -> None:
        self.lib.cg_dump(b"consume")
        self.run(["callgrind_control", "-d", str(self.broker_pid)], check=True, capture_output=True)


async def main_async(args: argparse.Namespace) -> None:
    import psutil

    from benchmarks.harness import runner
    from benchmarks.harness.drivers import txmq as drivers_txmq
    from benchmarks.harness.workload import STANDARD_WORKLOADS
    from txmq import native

    print(native.summary(), flush=True)
    workload = STANDARD_WORKLOADS["consume-256"].scaled(preload_messages=args.preload)
    driver = drivers_txmq.TxmqDriver(flush="sync")
    if args.broker_callgrind:
        drivers_txmq._START_TIMEOUT_S = 600.0
        drivers_txmq._STOP_TIMEOUT_S = 600.0
        real_admin = drivers_txmq.admin_call  # the topic.create call: 10 s is short under callgrind
        drivers_txmq.admin_call = lambda *a, **kw: real_admin(*a, **{**kw, "timeout_s": 600.0})
        real_exec = asyncio.create_subprocess_exec

        async def traced_exec(program: str, *rest: str, **kw: object) -> asyncio.subprocess.Process:
            if rest[:2] == ("-m", "txmq"):  # the broker
                cg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={args.broker_callgrind}"]
                return await real_exec(*cg, program, *rest, **kw)  # type: ignore[arg-type]
            return await real_exec(program, *rest, **kw)  # type: ignore[arg-type]

        asyncio.create_subprocess_exec = traced_exec  # type: ignore[assignment]  # the driver's module too
    await driver.setup(workload)
    try:
        endpoint = driver._endpoint()
        child = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--preload-child", endpoint, "--preload", str(args.preload),
            env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        )  # fmt: skip
        if await child.wait() != 0:
            raise RuntimeError("preload failed")
        consumer = await driver.consumer(0, [0])
        rec = runner._Recorder(measure_from=time.perf_counter_ns(), deadline=1 << 62)
        broker = psutil.Process(driver.server_pids()[0])
        marks = _Marks(broker.pid) if args.broker_callgrind else None
        if marks is not None:
            marks.zero()
        b0, c0, t0 = broker.cpu_times(), time.process_time(), time.perf_counter()
        while rec.consumed_total < args.consume:
            payloads = await consumer.receive(min(workload.consume_batch, args.consume - rec.consumed_total))
            if payloads:
                rec.on_receive(payloads, time.perf_counter_ns())
        elapsed, client = time.perf_counter() - t0, time.process_time() - c0
        b1 = broker.cpu_times()
        if marks is not None:
            marks.dump()
        await consumer.close()
        n = rec.consumed_total
        broker_s = (b1.user + b1.system) - (b0.user + b0.system)
        print(
            f"consume-256 {n:7d} msgs {n / elapsed:9,.0f} msg/s  CPU/msg client "
            f"{client / n * 1e6:6.2f} us  broker {broker_s / n * 1e6:6.2f} us",
            flush=True,
        )
    finally:
        await driver.teardown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--consume", type=int, default=20480, help="messages consumed (and measured)")
    parser.add_argument("--preload", type=int, default=20480, help="messages stored first (>= --consume)")
    parser.add_argument("--broker-callgrind", default="", help="run the broker under callgrind, output here")
    parser.add_argument("--preload-child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    args = parser.parse_args()
    if args.preload_child:
        coro = _preload_child(args.preload_child, args.preload)
    else:
        if args.consume > args.preload:
            parser.error("--consume must not exceed --preload")
        coro = main_async(args)
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(coro)
    else:
        asyncio.run(coro)


if __name__ == "__main__":
    main()
