"""Instructions per gRPC call of a whole server process, every thread included (callgrind).

Unlike ``grpc_send_cost.py`` (the handler in process), this counts everything a server process does
for a call: grpc's C core and its poller thread, the asyncio loop, the permissive front's relay, the
handler, the store's group commit and dispatch (the kernel's work, e.g. fdatasync, is not counted).
The server runs under ``valgrind --tool=callgrind``; the client (``grpc_bench.py``'s, outside valgrind)
warms up with 200 calls, zeroes the counters (``callgrind_control -z``), makes N calls and dumps
(``callgrind_control -d``): instructions / N is the server's cost per call.

    python benchmarks/grpc_call_cost.py SRC single|batch|pipelined N [broker args...]

SRC: a checkout's ``src`` to run ``txmq broker`` from (sync flush; e.g. ``--grpc-tls off`` or
``--flush async`` after N), or ``bare`` for ``grpc_bench.py``'s bare grpc.aio server. Prints one JSON
line (the dump's path too, for ``callgrind_annotate``). Instruction counts are not wall-clock free: the
100 ms background tick and the fsync's inline-or-thread choice depend on speed; repeat and compare
medians (about ±2% run to run on a single send).
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import grpc_bench as gb  # noqa: E402
from tests.conftest import free_port, subprocess_env  # noqa: E402
from tests.integration.remoting_support import wait_for_line  # noqa: E402

WARMUP_CALLS = 200
PIPELINED_INFLIGHT = 16


def _command(src: str, port: int, out: str, tmp: str, extra: list[str]) -> list[str]:
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    if src == "bare":
        return [*valgrind, sys.executable, str(ROOT / "benchmarks/grpc_bench.py"), "--serve-bare", str(port)]
    return [
        *valgrind, sys.executable, "-m", "txmq", "broker", "--data-dir", f"{tmp}/data", "--port", str(port),
        "--remoting-port", str(free_port()), "--namesrv-port", str(free_port()), "--flush", "sync", *extra,
    ]  # fmt: skip


async def _calls(target: gb.Target, workload: str, count: int) -> None:
    if workload == "pipelined":

        async def one(calls: int) -> None:
            for _ in range(calls):
                await gb.send_once(target, gb.TOPIC_SEND, 1)

        await asyncio.gather(*(one(count // PIPELINED_INFLIGHT) for _ in range(PIPELINED_INFLIGHT)))
        return
    for _ in range(count):
        await gb.send_once(target, gb.TOPIC_SEND, gb.BATCH if workload == "batch" else 1)


def _control(option: str, pid: int) -> None:
    subprocess.run(["callgrind_control", option, str(pid)], check=True, stdout=subprocess.DEVNULL)


async def _drive(port: int, pid: int, workload: str, count: int) -> None:
    target = gb.Target("server", port, pid)
    await target.open()
    await _calls(target, workload, WARMUP_CALLS)
    _control("-z", pid)
    await _calls(target, workload, count)
    _control("-d", pid)


def main() -> None:
    src, workload, count, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    if workload == "pipelined":
        count -= count % PIPELINED_INFLIGHT
    tmp = tempfile.mkdtemp(prefix="grpc-call-cost-")
    home = Path(tmp) / "home"
    home.mkdir()
    env = subprocess_env(home)
    if src != "bare":
        env["PYTHONPATH"] = str(Path(src).resolve()) + os.pathsep + env["PYTHONPATH"]
    port = free_port()
    out = f"{tmp}/callgrind.out"
    with open(f"{tmp}/stderr.log", "w") as errors:
        process = subprocess.Popen(
            _command(src, port, out, tmp, extra), env=env, stdout=subprocess.PIPE, stderr=errors, text=True
        )
    try:
        wait_for_line(process, "bare grpc server ready" if src == "bare" else "txmq broker ready on", 900)
        gb.install_uvloop()
        asyncio.run(_drive(port, process.pid, workload, count))
    finally:
        process.terminate()
        process.wait(timeout=300)
    dump = max(glob.glob(out + ".*"), key=os.path.getmtime)
    with open(dump) as lines:
        total = next(int(line.split()[1]) for line in lines if line.startswith("totals:"))
    print(json.dumps({"src": src, "workload": workload, "calls": count, "extra": extra, "dump": dump,
                      "instructions": total, "per_call": round(total / count)}))  # fmt: skip


if __name__ == "__main__":
    main()
