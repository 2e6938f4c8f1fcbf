"""SDK batch sends through the remoting protocol: ``Producer.send_batch`` of 100 x 1 KB messages.

A ``txmq broker`` subprocess (sync flush unless ``--flush async``), one producer on the remoting
transport, one batch in flight (the issue 5 / issue 8 figure). Prints msg/s, the batch round trip's
p50/p99 and the CPU per message of the broker and of this (the SDK's) process.

    python benchmarks/batch_bench.py [--seconds 3] [--batches N] [--flush sync|async] [--root CHECKOUT]

``--batches N`` sends exactly N batches (for instruction counts: run it under
``valgrind --tool=callgrind`` for two N and divide the difference; the broker child is not traced).
``--root`` measures another checkout (its ``src`` and test harness) with this same script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


async def run(args: argparse.Namespace) -> None:
    import psutil
    from tests.client.broker import BrokerProcess

    from txmq import native
    from txmq.client import Message, Producer

    print(native.summary(), flush=True)
    body = os.urandom(512).hex().encode()  # 1 KB
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), "--flush", args.flush)
        broker.start()
        try:
            assert broker.process is not None
            broker_ps = psutil.Process(broker.process.pid)
            async with Producer(broker.namesrv, group="bench", transport="remoting") as producer:
                batch = [Message("BenchBatch", body, tags="bench") for _ in range(100)]
                for _ in range(3):  # routes, connection, topic creation
                    await producer.send_batch(batch)
                latencies: list[float] = []
                times = broker_ps.cpu_times()
                broker_cpu, client_cpu = times.user + times.system, time.process_time()
                start = time.perf_counter()
                sent = 0
                while (sent < args.batches) if args.batches else (time.perf_counter() - start < args.seconds):
                    t0 = time.perf_counter()
                    results = await producer.send_batch(batch)
                    latencies.append((time.perf_counter() - t0) * 1000)
                    assert len(results) == 100
                    sent += 1
                elapsed = time.perf_counter() - start
                times = broker_ps.cpu_times()
                broker_us = (times.user + times.system - broker_cpu) / (sent * 100) * 1e6
                client_us = (time.process_time() - client_cpu) / (sent * 100) * 1e6
        finally:
            broker.stop()
    qs = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
    print(
        f"SDK batch of 100 ({args.flush}) {sent * 100 / elapsed:>10,.0f} msg/s"
        f"  ({sent * 100} in {elapsed:.2f} s)  p50 {qs[49]:.3f} ms  p99 {qs[98]:.3f} ms"
        f"  CPU/msg broker {broker_us:.1f} us, client {client_us:.1f} us",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--batches", type=int, default=0, help="send exactly this many batches")
    parser.add_argument("--flush", choices=["sync", "async"], default="sync")
    parser.add_argument("--root", default=str(ROOT), help="the checkout to measure (src and tests)")
    args = parser.parse_args()
    root = Path(args.root).resolve()
    sys.path[:0] = [str(root / "src"), str(root)]
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
