"""txmq's gRPC door against a bare grpc.aio server, side by side in one run (1 KB bodies).

Python's gRPC stack is the ceiling of this door, so its figures only mean something next to a server that
does nothing but gRPC: ``bare`` implements SendMessage (answers OK with the client's message id, no
storage) and ReceiveMessage (streams canned 1 KB messages) of ``apache.rocketmq.v2.MessagingService``;
``txmq`` is the real ``txmq broker`` subprocess with sync flush. Both are subprocesses on free ports with
the same event loop (uvloop when installed), and the client is the same raw generated stub (grpc.aio), so
both pay the same client cost. Every workload runs bare, txmq, bare, txmq, ... (``--rounds``).

Workloads:

* ``single``: one SendMessage of one message in flight: msg/s, mean and p99 round trip
  (goal: txmq's mean within 0.25 ms of bare's);
* ``pipelined``: single-message SendMessage calls, ``--inflight`` (64) in flight (goal >= 0.7 x bare);
* ``batch``: 100 messages per SendMessage, 8 calls in flight, sync flush (goal >= 0.7 x bare);
* ``receive``: ReceiveMessage of ``--receive-batch`` (1024) messages per call, 4 streams in flight, each
  stream its own consumer group reading a prefilled topic from the start, no acks (goal >= 0.7 x bare).

Server CPU (psutil, by pid) is reported per message: where txmq spends more than bare is what to cut.
Results: a table on stdout and JSON under ``benchmarks/results/grpc/``.

Usage: ``python benchmarks/grpc_bench.py [--seconds 3] [--rounds 2] [--only single,batch] [--out NAME]``.
The machine is shared: quote ratios of one run, never absolute figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import psutil  # noqa: E402
from tests.conftest import free_port, subprocess_env  # noqa: E402
from tests.integration.remoting_support import wait_for_line  # noqa: E402

from txmq import native  # noqa: E402
from txmq.common.message import MessageType, MessageView  # noqa: E402
from txmq.protocol.grpc import convert, pb  # noqa: E402
from txmq.server.runtime import install_uvloop  # noqa: E402

S = pb.service
BODY = os.urandom(512).hex().encode()  # 1 KB
TOPIC_SEND = "BenchGrpcSend"
TOPIC_RECV = "BenchGrpcRecv"
METADATA = (("x-mq-client-id", "grpc-bench@1"), ("x-mq-language", "PYTHON"))
WARMUP_S = 0.5
RECEIVE_STREAMS = 4
BATCH = 100
BATCH_INFLIGHT = 8
SYSTEMS = ("bare", "txmq", "txmq-base", "bare-fsync")
GOALS = {"pipelined": 0.7, "batch": 0.7, "receive": 0.7}
SINGLE_GOAL_MS = 0.25


# ---- the bare server (run as a subprocess: `grpc_bench.py --serve-bare PORT`) --------------------------
def _canned_message(i: int) -> Any:
    view = MessageView(
        topic=TOPIC_RECV,
        body=BODY,
        message_id=f"BARE{i:028d}",
        queue_id=0,
        queue_offset=i,
        commit_log_offset=i * 1200,
        born_timestamp_ms=1_800_000_000_000,
        store_timestamp_ms=1_800_000_000_000,
        born_host="127.0.0.1",
        store_host="127.0.0.1:10911",
        tags="bench",
        receipt_handle=f"receipt-{i}",
        message_type=MessageType.NORMAL,
    )
    return convert.to_wire(view, invisible_ms=60_000)


class BareServicer(pb.MessagingServiceServicer):  # type: ignore[misc]
    """SendMessage and ReceiveMessage with no storage: the gRPC stack's own cost."""

    def __init__(self, fsync_dir: str = "") -> None:
        self.offset = itertools.count()
        self.canned = [S.ReceiveMessageResponse(message=_canned_message(i)) for i in range(1024)]
        self.log_fd = os.open(f"{fsync_dir}/log", os.O_WRONLY | os.O_CREAT | os.O_APPEND) if fsync_dir else -1

    async def SendMessage(self, request: Any, context: Any) -> Any:
        if self.log_fd >= 0:  # bare-fsync: append the bodies and fdatasync in a thread, no group commit
            os.write(self.log_fd, b"".join(m.body for m in request.messages))
            await asyncio.get_running_loop().run_in_executor(None, os.fdatasync, self.log_fd)
        entries = [
            S.SendResultEntry(
                status=convert.OK_STATUS, message_id=m.system_properties.message_id, offset=next(self.offset)
            )
            for m in request.messages
        ]
        return S.SendMessageResponse(status=convert.OK_STATUS, entries=entries)

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield S.ReceiveMessageResponse(status=convert.OK_STATUS)
        for response in self.canned[: request.batch_size or 32]:
            yield response
        last = S.ReceiveMessageResponse()
        convert.set_timestamp(last.delivery_timestamp, int(time.time() * 1000))
        yield last


async def _serve_bare(port: int, fsync_dir: str) -> None:
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 16 << 20)])
    server.add_insecure_port(f"127.0.0.1:{port}")
    pb.add_MessagingServiceServicer_to_server(BareServicer(fsync_dir), server)
    await server.start()
    print(f"bare grpc server ready on {port}", flush=True)
    await server.wait_for_termination()


def _spawn(command: list[str], home: Path, src: str = "") -> subprocess.Popen[str]:
    """Start a server; its stderr goes to a file (a full pipe would stall it mid-benchmark)."""
    env = subprocess_env(home)
    if src:  # a baseline checkout's sources first
        env["PYTHONPATH"] = str(Path(src).resolve()) + os.pathsep + env["PYTHONPATH"]
    with open(home / "stderr.log", "w") as errors:
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)


@contextmanager
def bare_server(loop: str, fsync: bool = False) -> Iterator[tuple[int, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        command = [sys.executable, str(Path(__file__).resolve()), "--serve-bare", str(port), "--loop", loop]
        if fsync:
            command += ["--bare-fsync-dir", tmp]
        process = _spawn(command, Path(tmp))
        try:
            wait_for_line(process, "bare grpc server ready")
            yield port, process.pid
        finally:
            process.terminate()
            process.wait(timeout=20)


@contextmanager
def txmq_broker(
    flush: str, src: str = "", extra: Sequence[str] = (), receive_batch: int = 0
) -> Iterator[tuple[int, int]]:
    """``txmq broker`` from this checkout, or from another checkout's ``src`` (``--baseline-src``).

    ``receive_batch`` > 32 raises the broker's ``grpc_receive_batch_max`` (Apache's proxy serves at most
    32 messages per receive, and so does txmq by default) to what the bare server streams per call."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        port = free_port()
        config: list[str] = []
        if receive_batch > 32:
            Path(tmp, "broker.json").write_text(json.dumps({"grpc_receive_batch_max": receive_batch}))
            config = ["--config", f"{tmp}/broker.json"]
        command = [
            sys.executable, "-m", "txmq", "broker", "--data-dir", f"{tmp}/data", "--port", str(port),
            "--remoting-port", str(free_port()), "--namesrv-port", str(free_port()), "--flush", flush,
            *config, *extra,
        ]  # fmt: skip
        process = _spawn(command, home, src)
        try:
            wait_for_line(process, "txmq broker ready on")
            yield port, process.pid
        finally:
            process.terminate()
            process.wait(timeout=20)


# ---- the client ------------------------------------------------------------------------------------
@dataclass
class Run:
    workload: str
    system: str
    round: int
    messages: int
    seconds: float
    msg_per_s: float
    server_cpu_s: float
    server_cpu_us_per_msg: float
    mean_ms: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None


@dataclass
class Target:
    system: str
    port: int
    pid: int
    stub: Any = None
    channel: Any = None
    ids: Iterator[int] = field(default_factory=itertools.count)

    async def open(self) -> None:
        self.channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{self.port}", options=[("grpc.max_receive_message_length", 64 << 20)]
        )
        self.stub = pb.MessagingServiceStub(self.channel)

    def cpu(self) -> float:
        times = psutil.Process(self.pid).cpu_times()
        return float(times.user + times.system)


def _template(topic: str) -> Any:
    message = pb.Message(body=BODY)
    message.topic.name = topic
    sysp = message.system_properties
    sysp.tag = "bench"
    sysp.body_encoding = pb.Encoding.IDENTITY
    sysp.message_type = pb.MessageType.NORMAL
    sysp.born_host = "127.0.0.1"
    convert.set_timestamp(sysp.born_timestamp, int(time.time() * 1000))
    return message


def send_request(target: Target, topic: str, count: int) -> Any:
    template = _template(topic)
    messages = []
    for _ in range(count):
        message = pb.Message()
        message.CopyFrom(template)
        message.system_properties.message_id = f"01BENCH{next(target.ids):025d}"
        messages.append(message)
    return S.SendMessageRequest(messages=messages)


async def send_once(target: Target, topic: str, count: int) -> None:
    reply = await target.stub.SendMessage(send_request(target, topic, count), metadata=METADATA)
    if reply.status.code != pb.Code.OK:
        raise RuntimeError(f"{target.system} SendMessage failed: {reply.status.message}")


Worker = Callable[[Target, float, list[float]], Coroutine[Any, Any, int]]


async def measure(target: Target, workload: str, rnd: int, seconds: float, worker: Worker) -> Run:
    await worker(target, time.perf_counter() + WARMUP_S, [])
    latencies: list[float] = []
    cpu0, start = target.cpu(), time.perf_counter()
    done = await worker(target, start + seconds, latencies)
    elapsed, cpu = time.perf_counter() - start, target.cpu() - cpu0
    run = Run(workload, target.system, rnd, done, elapsed, done / elapsed, cpu, cpu / max(1, done) * 1e6)
    if len(latencies) >= 100:
        qs = statistics.quantiles(latencies, n=100)
        run.mean_ms, run.p50_ms, run.p99_ms = statistics.fmean(latencies), qs[49], qs[98]
    return run


async def single(target: Target, stop_at: float, latencies: list[float]) -> int:
    done = 0
    while time.perf_counter() < stop_at:
        t0 = time.perf_counter()
        await send_once(target, TOPIC_SEND, 1)
        latencies.append((time.perf_counter() - t0) * 1000)
        done += 1
    return done


def pipelined(inflight: int) -> Worker:
    async def run(target: Target, stop_at: float, latencies: list[float]) -> int:
        done = 0

        async def one() -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                await send_once(target, TOPIC_SEND, 1)
                done += 1

        await asyncio.gather(*(one() for _ in range(inflight)))
        return done

    return run


async def batches(target: Target, stop_at: float, latencies: list[float]) -> int:
    done = 0

    async def one() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            await send_once(target, TOPIC_SEND, BATCH)
            latencies.append((time.perf_counter() - t0) * 1000)
            done += BATCH

    await asyncio.gather(*(one() for _ in range(BATCH_INFLIGHT)))
    return done


def receiving(batch_size: int) -> Worker:
    groups = itertools.count()

    async def run(target: Target, stop_at: float, latencies: list[float]) -> int:
        done = 0

        async def stream(group: str) -> None:
            nonlocal done
            request = S.ReceiveMessageRequest(batch_size=batch_size, auto_renew=False)
            request.group.name = group
            request.message_queue.topic.name = TOPIC_RECV
            request.message_queue.id = -1
            request.filter_expression.expression = "*"
            convert.set_duration(request.invisible_duration, 300_000)
            convert.set_duration(request.long_polling_timeout, 0)
            while time.perf_counter() < stop_at:
                got = 0
                async for response in target.stub.ReceiveMessage(request, metadata=METADATA, timeout=10):
                    if response.WhichOneof("content") == "message":
                        got += 1
                if got == 0:
                    return  # drained (txmq: this group has read the whole prefilled topic)
                done += got

        await asyncio.gather(*(stream(f"BenchGroup{next(groups)}") for _ in range(RECEIVE_STREAMS)))
        return done

    return run


async def prefill(target: Target, count: int) -> None:
    sent = 0

    async def one() -> None:
        nonlocal sent
        while sent < count:
            sent += BATCH
            await send_once(target, TOPIC_RECV, BATCH)

    await asyncio.gather(*(one() for _ in range(BATCH_INFLIGHT)))


# ---- the run ---------------------------------------------------------------------------------------
def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for workload in dict.fromkeys(r.workload for r in runs):
        by = {s: [r for r in runs if r.workload == workload and r.system == s] for s in SYSTEMS}
        med = {s: statistics.median(r.msg_per_s for r in rs) for s, rs in by.items() if rs}
        cpu = {s: statistics.median(r.server_cpu_us_per_msg for r in rs) for s, rs in by.items() if rs}
        row: dict[str, Any] = {
            "workload": workload,
            "bare_msg_per_s": med.get("bare"),
            "txmq_msg_per_s": med.get("txmq"),
            "base_msg_per_s": med.get("txmq-base"),
            "txmq_over_base": med["txmq"] / med["txmq-base"] if med.get("txmq-base") else None,
            "ratio": med["txmq"] / med["bare"] if med.get("bare") else None,
            "bare_cpu_us_per_msg": cpu.get("bare"),
            "txmq_cpu_us_per_msg": cpu.get("txmq"),
            "base_cpu_us_per_msg": cpu.get("txmq-base"),
            "bare_fsync_msg_per_s": med.get("bare-fsync"),
        }
        if workload == "single":
            mean = {s: statistics.median(r.mean_ms or 0.0 for r in rs) for s, rs in by.items() if rs}
            p99 = {s: statistics.median(r.p99_ms or 0.0 for r in rs) for s, rs in by.items() if rs}
            row.update(bare_mean_ms=mean["bare"], txmq_mean_ms=mean["txmq"], bare_p99_ms=p99["bare"])
            row.update(base_mean_ms=mean.get("txmq-base"), base_p99_ms=p99.get("txmq-base"))
            row.update(bare_fsync_mean_ms=mean.get("bare-fsync"), bare_fsync_p99_ms=p99.get("bare-fsync"))
            row.update(txmq_p99_ms=p99["txmq"], mean_gap_ms=mean["txmq"] - mean["bare"])
            row["goal_met"] = row["mean_gap_ms"] <= SINGLE_GOAL_MS
        else:
            row["goal_met"] = row["ratio"] is not None and row["ratio"] >= GOALS[workload]
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'workload':<11}{'bare msg/s':>12}{'txmq msg/s':>12}{'ratio':>7}  {'CPU us/msg b/t':>16}  goal")
    for row in rows:
        extra = ""
        if row["workload"] == "single":
            extra = (
                f"  mean {row['bare_mean_ms']:.3f}/{row['txmq_mean_ms']:.3f} ms (gap "
                f"{row['mean_gap_ms']:+.3f}), p99 {row['bare_p99_ms']:.3f}/{row['txmq_p99_ms']:.3f} ms"
            )
        cpu = f"{row['bare_cpu_us_per_msg']:.0f}/{row['txmq_cpu_us_per_msg']:.0f}"
        if row["bare_fsync_msg_per_s"]:
            extra += f"  [bare-fsync {row['bare_fsync_msg_per_s']:,.0f} msg/s"
            if row["workload"] == "single":
                extra += f", mean {row['bare_fsync_mean_ms']:.3f} p99 {row['bare_fsync_p99_ms']:.3f} ms"
            extra += "]"
        if row["base_msg_per_s"]:
            extra += (
                f"  [baseline {row['base_msg_per_s']:,.0f} msg/s, {row['base_cpu_us_per_msg']:.0f} us/msg; "
                f"txmq/baseline {row['txmq_over_base']:.2f}]"
            )
            if row["workload"] == "single":
                extra += f" [baseline mean {row['base_mean_ms']:.3f} p99 {row['base_p99_ms']:.3f} ms]"
        print(
            f"{row['workload']:<11}{row['bare_msg_per_s']:>12,.0f}{row['txmq_msg_per_s']:>12,.0f}"
            f"{row['ratio']:>7.2f}  {cpu:>16}  {'met' if row['goal_met'] else 'NOT met'}{extra}"
        )


async def run(args: argparse.Namespace) -> None:
    only = args.only.split(",") if args.only else ["single", "pipelined", "batch", "receive"]
    workers: dict[str, Worker] = {
        "single": single,
        "pipelined": pipelined(args.inflight),
        "batch": batches,
        "receive": receiving(args.receive_batch),
    }
    runs: list[Run] = []
    with contextlib.ExitStack() as stack:
        targets = [Target("bare", *stack.enter_context(bare_server(args.loop)))]
        if args.bare_fsync:
            targets.append(Target("bare-fsync", *stack.enter_context(bare_server(args.loop, fsync=True))))
        extra = args.txmq_args.split()
        batch = args.receive_batch if "receive" in only else 0
        targets.append(
            Target("txmq", *stack.enter_context(txmq_broker(args.flush, extra=extra, receive_batch=batch)))
        )
        if args.baseline_src:
            base = stack.enter_context(
                txmq_broker(args.flush, args.baseline_src, extra=extra, receive_batch=batch)
            )
            targets.append(Target("txmq-base", *base))
        for target in targets:
            await target.open()
            await send_once(target, TOPIC_SEND, 1)  # connect, create the topic
        if "receive" in only:
            for target in targets:
                if target.system.startswith("txmq"):
                    await prefill(target, args.receive_prefill)
        for workload in only:
            for rnd, target in itertools.product(range(args.rounds), targets):
                spy = _py_spy(args.py_spy, target, workload, rnd, args.seconds, args.py_spy_native)
                result = await measure(target, workload, rnd, args.seconds, workers[workload])
                if spy is not None:
                    spy.wait()
                runs.append(result)
                lat = f"  mean {result.mean_ms:.3f} p99 {result.p99_ms:.3f} ms" if result.mean_ms else ""
                print(
                    f"{workload:<10} {target.system:<5} round {rnd}: {result.msg_per_s:>10,.0f} msg/s  "
                    f"server CPU {result.server_cpu_us_per_msg:6.1f} us/msg{lat}",
                    flush=True,
                )
        for target in targets:
            await target.channel.close()
    rows = summarize(runs)
    print_table(rows)
    out = ROOT / "benchmarks" / "results" / "grpc" / f"{args.out or time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "native": native.summary(),
        "note": "shared machine (other jobs running): compare ratios within this run only",
        "summary": rows,
        "runs": [asdict(r) for r in runs],
    }
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")


def _py_spy(
    out_dir: str, target: Target, workload: str, rnd: int, seconds: float, native: bool = False
) -> Any:
    """With ``--py-spy DIR``: sample the txmq broker during the timed window (collapsed stacks;
    ``--py-spy-native``: with native frames, e.g. grpc's C core and protobuf; py-spy then pauses the
    broker for every sample, so that round's figures are not comparable)."""
    if not out_dir or target.system != "txmq":
        return None
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    command = [
        str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(target.pid), "--nonblocking",
        "--format", "raw", "--rate", "250", "--duration", str(int(seconds + WARMUP_S)),
        "-o", f"{out_dir}/{workload}-{rnd}.txt",
    ]  # fmt: skip
    if native:  # py-spy reads native stacks only while the process is paused: that round runs slower
        command[command.index("--nonblocking")] = "--native"
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--receive-batch", type=int, default=1024)
    parser.add_argument("--receive-prefill", type=int, default=100_000)
    parser.add_argument("--only", default="")
    parser.add_argument("--out", default="")
    parser.add_argument("--py-spy", default="", help="sample the broker with py-spy into this directory")
    parser.add_argument("--py-spy-native", action="store_true", help="with --py-spy: native frames too")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop", help="bare server's loop")
    parser.add_argument("--flush", choices=("sync", "async"), default="sync", help="txmq's flush mode")
    parser.add_argument(
        "--txmq-args", default="", help="extra `txmq broker` flags, both checkouts ('--grpc-tls off')"
    )
    parser.add_argument(
        "--baseline-src", default="", help="also run txmq-base: `txmq broker` from this src directory"
    )
    parser.add_argument(
        "--bare-fsync", action="store_true", help="also run bare-fsync: bare + one fdatasync per send call"
    )
    parser.add_argument("--bare-fsync-dir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop == "uvloop":
        install_uvloop()  # like `txmq broker`: the same loop on both sides
    if args.serve_bare:
        asyncio.run(_serve_bare(args.serve_bare, args.bare_fsync_dir))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
