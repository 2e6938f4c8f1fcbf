"""The broker's event-loop thread CPU per message over gRPC (the thread that holds the GIL for every
handler), next to the whole process's: ``txmq broker`` from two checkouts, alternated, pipelined and
batch workloads of ``grpc_bench.py``. Thread CPU is read from ``/proc/<pid>/task/<pid>/stat`` (the main
thread runs the loop).

Usage: ``python benchmarks/grpc_loop_cpu.py SRC_A SRC_B [--seconds 3] [--rounds 2] [--txmq-args ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpc_bench as gb

TICK = os.sysconf("SC_CLK_TCK")


def main_thread_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15 of stat)


async def probe(args: argparse.Namespace) -> None:
    workers = {"pipelined": gb.pipelined(64), "batch": gb.batches}
    extra = args.txmq_args.split()
    for rnd in range(args.rounds):
        for src in args.srcs:
            for workload in args.only.split(","):
                with gb.txmq_broker("sync", src, extra=extra) as (port, pid):
                    target = gb.Target(src, port, pid)
                    await target.open()
                    await gb.send_once(target, gb.TOPIC_SEND, 1)
                    worker = workers[workload]
                    await worker(target, time.perf_counter() + gb.WARMUP_S, [])
                    cpu0, loop0, start = target.cpu(), main_thread_cpu(pid), time.perf_counter()
                    done = await worker(target, start + args.seconds, [])
                    elapsed, cpu, loop = (
                        time.perf_counter() - start,
                        target.cpu() - cpu0,
                        main_thread_cpu(pid) - loop0,
                    )
                    await target.channel.close()
                per = 1e6 / max(1, done)
                print(
                    f"round {rnd} {workload:<9} {src:<28} {done / elapsed:>9,.0f} msg/s  process "
                    f"{cpu * per:6.1f} us/msg  loop thread {loop * per:6.1f} us/msg  "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("srcs", nargs="+")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="pipelined,batch")
    parser.add_argument("--txmq-args", default="")
    gb.install_uvloop()
    asyncio.run(probe(parser.parse_args()))


if __name__ == "__main__":
    main()
