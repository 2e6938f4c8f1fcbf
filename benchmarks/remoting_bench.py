"""Remoting throughput and latency against a ``txmq broker`` subprocess, through the protocol (1 KB bodies).

Scenarios (each a few seconds; run on an idle machine, figures are per this machine):

* ``single``: one producer, one message in flight, sync flush: msg/s and p50/p99 round trip
  (``--producers N``: N connections, one message in flight each);
* ``pipelined``: single sends with ``--inflight`` requests in flight, async flush;
* ``batch``: batches of 100 (SEND_BATCH_MESSAGE), sync flush, one in flight;
* ``pull``: PULL_MESSAGE of 32 per request over the queues the pipelined run filled.

Usage: ``python benchmarks/remoting_bench.py [--seconds 3] [--inflight 256] [--only single,batch]
[--producers 1,2,4,8]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port, subprocess_env  # noqa: E402
from tests.integration.remoting_support import send_header, wait_for_line  # noqa: E402

from txmq import native  # noqa: E402
from txmq.protocol.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from txmq.protocol.remoting.message_codec import BatchMessage, decode_messages, encode_batch  # noqa: E402
from txmq.server.remoting_transport import RemotingEndpoint, connect  # noqa: E402

BODY = os.urandom(512).hex().encode()  # 1 KB
QUEUES = 4


PROFILE_DIR: str | None = None  # --py-spy DIR: record the broker's stacks (collapsed) into DIR/<flush>.txt


@contextmanager
def broker(flush: str) -> Iterator[int]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        port = free_port()
        command = [
            sys.executable, "-m", "txmq", "broker", "--data-dir", f"{tmp}/data", "--port", str(free_port()),
            "--remoting-port", str(port), "--namesrv-port", str(free_port()), "--flush", flush,
        ]  # fmt: skip
        if PROFILE_DIR:
            out = f"{PROFILE_DIR}/broker-{flush}.txt"
            spy = ["py-spy", "record", "--nonblocking", "-r", "200", "-f", "raw", "-o", out, "--"]
            command = [*spy, *command]
        process = subprocess.Popen(
            command, env=subprocess_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_for_line(process, "txmq broker ready on")
            global BROKER
            BROKER = _broker_process(process.pid)
            yield port
        finally:
            if PROFILE_DIR:
                process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            else:
                process.terminate()
            process.wait(timeout=20)


BROKER: psutil.Process | None = None
_CPU_MARK: list[float] = [0.0, 0.0]  # broker CPU seconds, bench CPU seconds at the scenario's start


def _broker_process(pid: int) -> psutil.Process:
    """The broker's process (the child when py-spy wraps it)."""
    process = psutil.Process(pid)
    children = process.children()
    return children[0] if PROFILE_DIR and children else process


def _cpu_now() -> tuple[float, float]:
    broker_cpu = 0.0
    if BROKER is not None:
        times = BROKER.cpu_times()
        broker_cpu = times.user + times.system
    return broker_cpu, time.process_time()


def mark_cpu() -> None:
    """Start counting CPU for the next scenario (CPU per message holds up on a shared machine)."""
    _CPU_MARK[:] = _cpu_now()


def report(name: str, count: int, elapsed: float, latencies_ms: list[float] | None = None) -> None:
    broker_cpu, client_cpu = _cpu_now()
    line = f"{name:<28} {count / elapsed:>10,.0f} msg/s  ({count} in {elapsed:.2f} s)"
    if latencies_ms:
        qs = statistics.quantiles(latencies_ms, n=100)
        line += f"  p50 {qs[49]:.3f} ms  p99 {qs[98]:.3f} ms"
    if count:
        broker_us = (broker_cpu - _CPU_MARK[0]) / count * 1e6
        client_us = (client_cpu - _CPU_MARK[1]) / count * 1e6
        line += f"  CPU/msg broker {broker_us:.1f} us, client {client_us:.1f} us"
    print(line, flush=True)


def _fields(topic: str, queue: int) -> dict[str, str]:
    return send_header(topic, {"TAGS": "bench"}, queue_id=queue)


async def single(endpoints: list[RemotingEndpoint], seconds: float) -> None:
    """Each endpoint (its own connection) sends one message at a time, for ``seconds``."""
    fields = [_fields("BenchSingle", q) for q in range(QUEUES)]
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds
    sent = 0

    async def producer(endpoint: RemotingEndpoint, k: int) -> None:
        nonlocal sent
        i = k
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            reply = await endpoint.request(RequestCode.SEND_MESSAGE_V2, fields[i % QUEUES], BODY)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            i += 1
            sent += 1

    mark_cpu()
    start = time.perf_counter()
    await asyncio.gather(*(producer(e, k) for k, e in enumerate(endpoints)))
    n = len(endpoints)
    name = "single, 1 in flight (sync)" if n == 1 else f"single, {n} producers (sync)"
    report(name, sent, time.perf_counter() - start, latencies)


async def pipelined(endpoint: RemotingEndpoint, seconds: float, inflight: int) -> int:
    fields = [_fields("BenchPipe", q) for q in range(QUEUES)]
    latencies: list[float] = []
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker(k: int) -> None:
        nonlocal done
        i = k
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            reply = await endpoint.request_nowait(RequestCode.SEND_MESSAGE_V2, fields[i % QUEUES], BODY)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            done += 1
            i += 1

    start = time.perf_counter()
    mark_cpu()
    await asyncio.gather(*(worker(k) for k in range(inflight)))
    report(f"pipelined, {inflight} in flight (async)", done, time.perf_counter() - start, latencies)
    return done


async def batches(endpoint: RemotingEndpoint, seconds: float) -> None:
    body = encode_batch([BatchMessage(BODY, {"TAGS": "bench"}) for _ in range(100)])
    latencies: list[float] = []
    mark_cpu()
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        reply = await endpoint.request(
            RequestCode.SEND_BATCH_MESSAGE, _fields("BenchBatch", sent // 100 % QUEUES), body
        )
        latencies.append((time.perf_counter() - t0) * 1000)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        sent += 100
    report("batch of 100 (sync)", sent, time.perf_counter() - start, latencies)


async def pull(endpoint: RemotingEndpoint, topic: str, total: int) -> None:
    async def drain(queue: int) -> int:
        offset, got = 0, 0
        while True:
            fields = {
                "consumerGroup": "BenchGroup", "topic": topic, "queueId": str(queue),
                "queueOffset": str(offset),
                "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
            }  # fmt: skip
            reply = await endpoint.request(RequestCode.PULL_MESSAGE, fields)
            if reply.code != ResponseCode.SUCCESS:
                return got
            got += len(decode_messages(reply.body))
            offset = int(reply.ext_fields["nextBeginOffset"])

    mark_cpu()
    start = time.perf_counter()
    got = sum(await asyncio.gather(*(drain(q) for q in range(QUEUES))))
    report("pull, 32 per request", got, time.perf_counter() - start)
    assert got == total, (got, total)


async def run(args: argparse.Namespace) -> None:
    only = set(args.only.split(",")) if args.only else {"single", "pipelined", "batch", "pull"}
    if only & {"single", "batch"}:
        with broker("sync") as port:
            endpoint = await connect("127.0.0.1", port)
            if "single" in only:
                for n in (int(x) for x in args.producers.split(",")):
                    extra = [await connect("127.0.0.1", port) for _ in range(n - 1)]
                    await single([endpoint, *extra], args.seconds)
                    for other in extra:
                        await other.close()
            if "batch" in only:
                await batches(endpoint, args.seconds)
            await endpoint.close()
    if only & {"pipelined", "pull"}:
        with broker("async") as port:
            endpoint = await connect("127.0.0.1", port)
            total = await pipelined(endpoint, args.seconds, args.inflight)
            if "pull" in only:
                await pull(endpoint, "BenchPipe", total)
            await endpoint.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--inflight", type=int, default=256)
    parser.add_argument("--only", default="")
    parser.add_argument("--producers", default="1", help="single row: producers (connections), e.g. 1,4")
    parser.add_argument("--py-spy", default="", help="record the broker with py-spy into this directory")
    args = parser.parse_args()
    print(native.summary(), flush=True)
    global PROFILE_DIR
    PROFILE_DIR = args.py_spy or None
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
