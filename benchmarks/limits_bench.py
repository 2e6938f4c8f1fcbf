"""Limits under load, measured on a real ``txmq broker`` subprocess (sync flush): its RSS while

1. ``--messages`` (default 1,000,000) messages are pending (sent in batches, nobody consumes);
2. a slow consumer pulls that backlog a little at a time while a producer keeps sending;
3. a POP consumer receives and never acks, until the broker refuses with TOO_MANY_REQUESTS at
   ``inflight_per_group_max``;
4. ``--connections`` idle TCP connections are held to the remoting port and as many to the gRPC port
   (after an HTTP/2 preface): the broker still serves a send and a receive, and remoting connections
   beyond ``connections_max`` (set to connections + 50 here) are answered SYSTEM_BUSY.

    python -m benchmarks.limits_bench [--messages 1000000] [--connections 2000] [--json out.json]

RSS is read from /proc (Linux). The machine may be shared: treat times as indicative, RSS as the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from txmq.client import Message, Producer, PullConsumer, SimpleConsumer
from txmq.common import limits
from txmq.common.errors import TooManyRequests, TxmqError
from txmq.common.ports import free_port
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.connection import NEED_DATA, RemotingConnection, Response

MiB = 1024 * 1024
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """``VmRSS`` (all resident memory) or ``RssAnon`` (heap: what the broker itself holds, without the
    page cache of files it maps) of ``pid``, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Broker:
    def __init__(self, root: Path, connections_max: int, flush: str) -> None:
        self.ports = {"grpc": free_port(), "remoting": free_port(), "namesrv": free_port()}
        config = root / "broker.json"
        # pop_without_ack receives limits.receive_batch_max at a time (Apache's proxy serves 32)
        settings = {"connections_max": connections_max, "grpc_receive_batch_max": limits.receive_batch_max}
        config.write_text(json.dumps(settings))
        home = root / "home"
        home.mkdir()
        env = dict(os.environ, HOME=str(home), PYTHONUNBUFFERED="1")
        src = str(Path(__file__).resolve().parent.parent / "src")
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "txmq", "broker", "--data-dir", str(root / "data"), "--flush", flush,
             "--port", str(self.ports["grpc"]), "--remoting-port", str(self.ports["remoting"]),
             "--namesrv-port", str(self.ports["namesrv"]), "--config", str(config)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if "txmq broker ready on" in line:
                break
        else:
            raise RuntimeError("the broker did not start")
        self.proc.stdout.close()

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ports['namesrv']}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    def rss(self) -> float:
        return round(rss_mib(self.proc.pid), 1)

    def rss_anon(self) -> float:
        return round(rss_mib(self.proc.pid, "RssAnon"), 1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def pending(broker: Broker, topic: str, count: int, out: dict[str, Any]) -> None:
    body = b"p" * 100
    batch = 1000
    started, before = time.monotonic(), broker.rss()
    async with Producer(broker.namesrv, send_timeout_s=30) as producer:
        sent = 0

        async def sender(share: int) -> None:
            nonlocal sent
            done = 0
            while done < share:
                try:
                    await producer.send_batch([Message(topic, body) for _ in range(batch)])
                except TxmqError as exc:  # a busy shared machine: a slow answer is not a failure here
                    out.setdefault("pending_send_errors", []).append(str(exc)[:120])
                    continue
                done += 1
                sent += batch

        workers = 4
        await asyncio.gather(*(sender(count // batch // workers) for _ in range(workers)))
    seconds = time.monotonic() - started
    out["pending"] = {
        "messages": sent, "body_bytes": len(body), "seconds": round(seconds, 1),
        "msgs_per_s": round(sent / seconds), "rss_before_mib": before, "rss_after_mib": broker.rss(),
        "rss_anon_after_mib": broker.rss_anon(),
        "rss_bytes_per_pending_message": round((broker.rss() - before) * MiB / max(1, sent)),
    }  # fmt: skip


async def slow_consumer(broker: Broker, topic: str, seconds: float, out: dict[str, Any]) -> None:
    samples: list[float] = []
    consumed = produced = 0
    stop = asyncio.Event()

    async def produce() -> None:
        nonlocal produced
        async with Producer(broker.namesrv, send_timeout_s=30) as producer:
            while not stop.is_set():
                with contextlib.suppress(TxmqError):
                    await producer.send_batch([Message(topic, b"s" * 100) for _ in range(500)])
                    produced += 500

    async def sample() -> None:
        while not stop.is_set():
            samples.append(broker.rss())
            await asyncio.sleep(0.5)

    tasks = [asyncio.create_task(produce()), asyncio.create_task(sample())]
    async with PullConsumer("slow-consumer", broker.namesrv, pull_batch_size=32) as consumer:
        consumer.assign(await consumer.queues(topic))
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            consumed += len(await consumer.poll(timeout_s=0.1))
            await asyncio.sleep(0.05)  # slow: ~600 messages/s at most
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    out["slow_consumer"] = {
        "seconds": seconds, "consumed": consumed, "produced_meanwhile": produced,
        "rss_min_mib": min(samples), "rss_max_mib": max(samples),
    }  # fmt: skip


async def pop_without_ack(broker: Broker, topic: str, out: dict[str, Any]) -> None:
    before, received, refused_with = broker.rss(), 0, ""
    started = time.monotonic()
    async with SimpleConsumer("never-acks", broker.grpc, transport="grpc") as consumer:
        await consumer.subscribe(topic)
        while received <= limits.inflight_per_group_max + 1000 and time.monotonic() - started < 300:
            try:
                got = await consumer.receive(
                    max_messages=limits.receive_batch_max, invisible_duration_s=600, wait_s=1
                )
            except TooManyRequests as exc:
                refused_with = f"TooManyRequests: {exc}"
                break
            received += len(got)
            if not got:
                break
    out["pop_without_ack"] = {
        "received_in_flight": received, "inflight_per_group_max": limits.inflight_per_group_max,
        "refused_with": refused_with, "rss_before_mib": before, "rss_after_mib": broker.rss(),
        "seconds": round(time.monotonic() - started, 1),
    }  # fmt: skip


def _route_code(sock: socket.socket) -> tuple[int | None, str]:
    conn = RemotingConnection()
    with sock:
        sock.settimeout(10)
        sock.sendall(
            conn.send(conn.new_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "bench-pending"}))
        )
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                conn.receive_data(data)
                while (event := conn.next_event()) is not NEED_DATA:
                    if isinstance(event, Response):
                        return event.command.code, event.command.remark or ""
    return None, "closed"


async def connections(broker: Broker, count: int, extra: int, out: dict[str, Any]) -> None:
    before = broker.rss()
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            held.append(socket.create_connection(("127.0.0.1", broker.ports["remoting"])))
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", broker.ports["grpc"]))
            sock.sendall(PREFACE)
            held.append(sock)
        await asyncio.sleep(2)  # let the broker accept them all
        with_idle = broker.rss()
        started = time.monotonic()
        async with Producer(broker.namesrv) as producer:
            result = await producer.send(Message("bench-conn", b"still serving"))
        async with SimpleConsumer("conn-check", broker.grpc, transport="grpc") as consumer:
            await consumer.subscribe("bench-conn")
            got: list[Any] = []
            while not got and time.monotonic() - started < 30:
                got = await consumer.receive(wait_s=2)
        served = bool(got) and result.message_id != ""
        refused = admitted = 0
        extras = [socket.create_connection(("127.0.0.1", broker.ports["remoting"])) for _ in range(extra)]
        for sock in extras:  # all held at once: the first ones fill the limit, the rest are refused
            code, _ = await asyncio.to_thread(_route_code, sock)
            if code == ResponseCode.SYSTEM_BUSY:
                refused += 1
            elif code is not None:
                admitted += 1
        out["connections"] = {
            "idle_remoting": count, "idle_grpc": count, "rss_before_mib": before,
            "rss_with_idle_mib": with_idle, "served_send_and_receive": served,
            "serve_seconds": round(time.monotonic() - started, 2), "extra_remoting_attempts": extra,
            "extra_admitted": admitted, "extra_refused_system_busy": refused,
        }  # fmt: skip
    finally:
        for sock in held:
            sock.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.connections + 1000)), hard))
    root = Path(tempfile.mkdtemp(prefix="txmq-limits-"))
    out: dict[str, Any] = {"command": " ".join(sys.argv), "host_cpus": os.cpu_count()}
    broker = Broker(root, connections_max=args.connections + 50, flush=args.flush)
    out["flush"] = args.flush
    try:
        out["rss_idle_mib"] = broker.rss()
        await pending(broker, "bench-pending", args.messages, out)
        print(json.dumps(out["pending"]), flush=True)
        await slow_consumer(broker, "bench-pending", args.slow_seconds, out)
        print(json.dumps(out["slow_consumer"]), flush=True)
        await pop_without_ack(broker, "bench-pending", out)
        print(json.dumps(out["pop_without_ack"]), flush=True)
        await connections(broker, args.connections, 100, out)
        print(json.dumps(out["connections"]), flush=True)
        out["broker_alive_at_end"] = broker.proc.poll() is None
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=2_000)
    parser.add_argument("--slow-seconds", type=float, default=10.0)
    parser.add_argument("--flush", choices=["sync", "async"], default="sync", help="async: fill 1M faster")
    parser.add_argument("--json", help="also write the figures to this file")
    arguments = parser.parse_args()
    figures = asyncio.run(main(arguments))
    print(json.dumps(figures, indent=2))
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(figures, indent=2))
    sys.exit(0 if figures.get("broker_alive_at_end") else 1)
