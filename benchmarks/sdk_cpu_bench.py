"""The SDK's CPU per pipelined single send, against a broker subprocess (async flush, remoting).

Two scenarios, one message per request, ``--inflight`` requests in flight:

* ``send``: ``--inflight`` tasks each awaiting ``Producer.send(msg, queue=...)`` in a loop (the shape of
  the compare harness's ``async-256`` workload);
* ``send_async``: one loop awaiting ``Producer.send_async(msg)`` (the window bounds what is in flight),
  gathering the futures.

Prints msg/s and CPU per message of this process (``process_time``: the SDK and the event loop) and of
the broker. CPU per message holds up on a shared machine where wall-clock rates do not. The SDK under
test is whatever ``txmq`` this interpreter imports (set ``PYTHONPATH``); the broker runs from
``--broker-src`` (default: the same sources), so an A/B of the SDK can keep one broker tree::

    PYTHONPATH=src python benchmarks/sdk_cpu_bench.py [--messages 20000] [--inflight 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from txmq.client import Message, MessageQueue, Producer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_broker(data: Path, src: str) -> tuple[subprocess.Popen[bytes], str]:
    grpc, remoting, namesrv = _free_port(), _free_port(), _free_port()
    env = dict(os.environ, PYTHONPATH=src, HOME=str(data / "home"), PYTHONUNBUFFERED="1")
    log = open(data / "broker.log", "wb")  # noqa: SIM115 - lives as long as the broker
    proc = subprocess.Popen(
        [sys.executable, "-m", "txmq", "broker", "--data-dir", str(data / "store"), "--port", str(grpc),
         "--remoting-port", str(remoting), "--namesrv-port", str(namesrv), "--flush", "async"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while b"txmq broker ready on" not in (data / "broker.log").read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit((data / "broker.log").read_text())
        time.sleep(0.05)
    return proc, f"127.0.0.1:{namesrv}"


async def _send_tasks(producer: Producer, queues: list[MessageQueue], n: int, inflight: int) -> None:
    body = b"x" * 128
    left = [n]

    async def slot(i: int) -> None:
        while left[0] > 0:
            left[0] -= 1
            await producer.send(Message("bench", body), queue=queues[i % len(queues)])
            i += 1

    await asyncio.gather(*(slot(i) for i in range(inflight)))


async def _send_async(producer: Producer, n: int) -> None:
    body = b"x" * 128
    futures = [await producer.send_async(Message("bench", body)) for _ in range(n)]
    await asyncio.gather(*futures)


async def run(endpoint: str, broker: psutil.Process, scenario: str, n: int, inflight: int) -> str:
    async with Producer(endpoint, group="bench", max_in_flight=inflight) as producer:
        await producer.send(Message("bench", b"warm"))
        queues = await producer.transport.route("bench", for_write=True)
        await _send_tasks(producer, queues, 2000, inflight)  # warm-up
        b0 = broker.cpu_times()
        c0, t0 = time.process_time(), time.perf_counter()
        if scenario == "send":
            await _send_tasks(producer, queues, n, inflight)
        else:
            await _send_async(producer, n)
        elapsed, client = time.perf_counter() - t0, time.process_time() - c0
        b1 = broker.cpu_times()
    broker_s = (b1.user + b1.system) - (b0.user + b0.system)
    return (
        f"{scenario:<10} {n / elapsed:9,.0f} msg/s  CPU/msg client {client / n * 1e6:6.1f} us"
        f"  broker {broker_s / n * 1e6:6.1f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--inflight", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="send,send_async")
    parser.add_argument("--broker-src", default="")
    args = parser.parse_args()
    import txmq

    src = args.broker_src or str(Path(txmq.__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        proc, endpoint = _start_broker(Path(tmp), src)
        try:
            broker = psutil.Process(proc.pid)
            for _ in range(args.rounds):
                for scenario in args.only.split(","):
                    line = asyncio.run(run(endpoint, broker, scenario, args.messages, args.inflight))
                    print(line, flush=True)
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
