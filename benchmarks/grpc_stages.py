"""Where one SYNC SendMessage spends its time, stage by stage (1 KB, one call in flight).

A broker subprocess (pure Python: the stages are monkeypatched into grpc_decode, grpc_server and
GroupCommit, which compiled classes do not allow) records perf_counter timestamps per call: request
parse start/end, handler entry, the append (GroupCommit.waiter), the flush step, fsync start/end (and
the thread it ran on), the executor's callback back on the loop, the group's completion, the handler's
return and the reply's serialization. The client (same machine, same monotonic clock) adds send and
reply-received times. Printed: per-stage medians/means, inline vs thread fsync calls, the slowest calls.

Usage: ``python benchmarks/grpc_stages.py [--calls 2000] [--inline-us-max US] [--bare]``
(``--inline-us-max`` overrides ``limits.flush_inline_sync_us_max`` in the broker, for an A/B of the
inline-fsync limit; ``--bare`` answers SendMessage at once behind the same handlers and hooks, no broker).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

STAGES = ["c0", "parse0", "parse1", "h0", "append", "fstep", "sync0", "sync1", "synced_cb", "complete"]
STAGES += ["h1", "ser", "c1"]
WARMUP = 100
pc = time.perf_counter


def _instrument(cur: dict[str, Any], recs: list[dict[str, Any]]) -> None:
    from txmq.server import grpc_decode, grpc_server
    from txmq.storage import flush

    main = threading.get_ident()
    parser, serializer = grpc_decode._parser, grpc_decode._serializer

    def timed_parser(cls: Any) -> Any:
        parse = parser(cls)
        send = cls.DESCRIPTOR.name == "SendMessageRequest"

        def timed(data: bytes) -> Any:
            if send:
                cur.clear()
                cur["parse0"] = pc()
            request = parse(data)
            if send:
                cur["parse1"] = pc()
            return request

        return timed

    def timed_serializer(cls: Any) -> Any:
        serialize = serializer(cls)
        send = cls.DESCRIPTOR.name == "SendMessageResponse"

        def timed(response: Any) -> bytes:
            data = serialize(response)
            if send:
                cur["ser"] = pc()
                recs.append(dict(cur))
            return data  # type: ignore[no-any-return]

        return timed

    grpc_decode._parser, grpc_decode._serializer = timed_parser, timed_serializer  # type: ignore[assignment]
    servicer = grpc_server.MessagingServicer
    send_message = servicer.SendMessage

    async def timed_send(self: Any, request: Any, context: Any) -> Any:
        cur["h0"] = pc()
        response = await send_message(self, request, context)
        cur["h1"] = pc()
        return response

    servicer.SendMessage = timed_send  # type: ignore[method-assign]
    commit: Any = flush.GroupCommit
    waiter, step, timed_sync, synced, complete = (
        commit.waiter, commit._flush_step, commit._timed_sync, commit._synced, commit.complete
    )  # fmt: skip

    def w(self: Any, end: int) -> Any:
        cur.setdefault("append", pc())
        return waiter(self, end)

    def s(self: Any) -> None:
        cur.setdefault("fstep", pc())
        step(self)

    def t(self: Any, segments: Any) -> int:
        cur["sync0"] = pc()
        cur["thread"] = threading.get_ident() != main
        took = timed_sync(self, segments)
        cur["sync1"] = pc()
        return took  # type: ignore[no-any-return]

    def y(self: Any, target: int, done: Any) -> None:
        cur["synced_cb"] = pc()
        synced(self, target, done)

    def c(self: Any, target: int) -> None:
        cur.setdefault("complete", pc())
        complete(self, target)

    commit.waiter, commit._flush_step, commit._timed_sync, commit._synced, commit.complete = w, s, t, y, c


class BareSender:
    """``--bare``: SendMessage answered at once, behind the same grpc_decode handlers and stage hooks
    (every other RPC answers nothing): the gRPC part of a round trip without the broker."""

    def __init__(self, cur: dict[str, Any]) -> None:
        self.cur = cur

    async def SendMessage(self, request: Any, context: Any) -> Any:
        from txmq.protocol.grpc import convert, pb

        self.cur["h0"] = pc()
        entries = [
            pb.service.SendResultEntry(status=convert.OK_STATUS, message_id=m.system_properties.message_id)
            for m in request.messages
        ]
        self.cur["h1"] = pc()
        return pb.service.SendMessageResponse(status=convert.OK_STATUS, entries=entries)

    def __getattr__(self, name: str) -> Any:
        async def nothing(request: Any, context: Any) -> None:
            return None

        return nothing


async def _serve_bare(port: int, cur: dict[str, Any]) -> Any:
    import grpc

    from txmq.server.grpc_decode import messaging_handler

    server = grpc.aio.server()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.add_generic_rpc_handlers((messaging_handler(BareSender(cur)),))
    await server.start()
    return server


def serve(port: int, out: str, inline_us_max: float | None, bare: bool) -> None:
    from tests.conftest import free_port

    from txmq.broker.config import BrokerConfig
    from txmq.common import limits
    from txmq.server.runtime import install_uvloop, start_broker, tune_gc

    if inline_us_max is not None:
        limits.flush_inline_sync_us_max = inline_us_max  # type: ignore[misc]
    cur: dict[str, Any] = {}
    recs: list[dict[str, Any]] = []
    _instrument(cur, recs)
    install_uvloop()

    async def main() -> None:
        data = tempfile.mkdtemp()
        config = BrokerConfig(
            data_dir=f"{data}/data", grpc_port=port, remoting_port=free_port(), namesrv_port=free_port()
        ).validate()
        bare_server = await _serve_bare(port, cur) if bare else None
        running = None if bare else await start_broker(config)
        tune_gc()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print("ready", flush=True)
        await stop.wait()
        await asyncio.to_thread(Path(out).write_text, json.dumps(recs))
        if running is not None:
            await running.stop()
        if bare_server is not None:
            await bare_server.stop(None)

    asyncio.run(main())


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("grpc_bench", ROOT / "benchmarks" / "grpc_bench.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["grpc_bench"] = module
    spec.loader.exec_module(module)
    return module


def _line(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[int(len(ordered) * 0.99)]
    median = ordered[len(values) // 2]
    mean = statistics.fmean(values)
    return f"{label:30s} n={len(values):5d} median {median:7.0f} mean {mean:7.0f} p99 {p99:7.0f} us"


def report(recs: list[dict[str, Any]]) -> None:
    deltas: dict[str, list[float]] = {}
    for r in recs:
        prev = None
        for stage in STAGES:
            if stage in r:
                if prev is not None:
                    deltas.setdefault(f"{prev}->{stage}", []).append((r[stage] - r[prev]) * 1e6)
                prev = stage
    for key, values in deltas.items():
        print(_line(key, values))
    for label, thread in (("fsync inline", False), ("fsync in a thread", True)):
        part = [r for r in recs if bool(r.get("thread")) == thread]
        if part:
            rtt = [(r["c1"] - r["c0"]) * 1e6 for r in part]
            rest = [(r["c1"] - r["c0"] - r.get("sync1", 0) + r.get("sync0", 0)) * 1e6 for r in part]
            print(_line(f"{label}: rtt", rtt))
            print(_line(f"{label}: rtt - fsync", rest))
    rtt = [(r["c1"] - r["c0"]) * 1e6 for r in recs]
    sync = [(r.get("sync1", 0) - r.get("sync0", 0)) * 1e6 for r in recs]
    print(_line("ALL rtt", rtt))
    print(_line("ALL fsync", sync))
    print("slowest calls (us per stage):")
    for r in sorted(recs, key=lambda r: r["c1"] - r["c0"])[-10:]:
        stages = [s for s in STAGES if s in r]
        parts = " ".join(f"{b}:{(r[b] - r[a]) * 1e6:.0f}" for a, b in itertools.pairwise(stages))
        print(f"  {(r['c1'] - r['c0']) * 1e3:6.2f} ms {parts}{' thread' if r.get('thread') else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--inline-us-max", type=float, default=None)
    parser.add_argument("--bare", action="store_true", help="a bare gRPC SendMessage instead of the broker")
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1], args.inline_us_max, args.bare)
        return
    from tests.conftest import free_port

    from txmq.protocol.grpc import pb

    bench = _bench()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/stages.json"
        command = [sys.executable, __file__, "--serve", str(port), out]
        if args.inline_us_max is not None:
            command += ["--inline-us-max", str(args.inline_us_max)]
        if args.bare:
            command.append("--bare")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), TXMQ_PURE="1")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        client: list[tuple[float, float]] = []

        async def run() -> None:
            target = bench.Target("txmq", port, process.pid)
            await target.open()
            for i in range(args.calls + WARMUP):
                request = bench.send_request(target, "StageTopic", 1)
                sent = pc()
                reply = await target.stub.SendMessage(request, metadata=bench.METADATA)
                received = pc()
                assert reply.status.code == pb.Code.OK, reply.status
                if i >= WARMUP:
                    client.append((sent, received))

        asyncio.run(run())
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        recs = json.loads(Path(out).read_text())[-args.calls :]
    for (sent, received), r in zip(client, recs, strict=True):
        r["c0"], r["c1"] = sent, received
    what = "bare" if args.bare else f"txmq, inline limit {args.inline_us_max or 'default'}"
    print(f"{what}; load average {os.getloadavg()[0]:.1f}")
    report(recs)


if __name__ == "__main__":
    main()
