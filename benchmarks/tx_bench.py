"""Transactional messages: committed transactions per second, and the send path under a million pending
half messages (issue 4). 1 KB bodies, sync flush, a ``txmq broker`` subprocess on free ports.

``commits``: 8 producer **processes**, each with one transaction in flight (send the half message, run
the local transaction, commit), for ``--seconds`` after a warm-up; committed transactions per second. The
local transaction returns COMMIT at once (its time is measured and reported: it is excluded by doing no
work). Transports, each run A B A B (``--rounds``):

* ``native``: txmq's ``TransactionProducer`` over the remoting protocol (the SDK's default);
* ``grpc-official``: the official ``rocketmq-python-client`` ``Producer`` with a checker,
  ``begin_transaction()`` / ``send(msg, tx)`` / ``tx.commit()`` over gRPC;
* ``grpc-sdk``: txmq's ``TransactionProducer`` with ``transport="grpc"``;
* ``native-many``: like ``native``, but each producer process keeps ``--inflight`` (8) transactions in
  flight on its one ``TransactionProducer`` (tasks sharing it, as a RocketMQ producer is shared by an
  application's threads); an extra row, the ``native`` row stays the goal's shape.

Every row reports the broker's CPU per committed transaction (psutil on the broker process, whole run
including warm-up, divided by the transactions of the run), which survives a noisy machine better than
the rate.

After each run the broker's topic must hold exactly the committed messages (checked).

``pending``: prefill ``--halves`` (1,000,000) half messages that nobody decides, in process through the
Broker's own send preparation on the data dir, then

1. time the transaction check service's rounds (``TransactionService.tick``) in process, on that data dir
   and on an empty one, interleaved; the halves are not yet due (``--transaction-timeout 30m``), so a
   round must cost the same with or without them;
2. start ``txmq broker`` on the prefilled data dir and on an empty one, side by side, and measure the
   send path on both (A B A B): pipelined single sends over remoting (64 in flight) and the ``native``
   commits workload; goal: the prefilled broker keeps >= 90 % of the empty one's throughput. The brokers'
   idle CPU (background services, the check service included) is reported too.

``steps``: the broker's CPU for each step of a transaction, in process (no sockets; ASYNC flush, so no
fsync wait): ``--count`` half sends (``Broker.send``), then their END_TRANSACTION commits
(``Broker.end_transaction``), ``--reps`` times; thread CPU per transaction of each step (min, first
quartile, median). Less noisy than the rates: for an A/B, run it in both worktrees at the same time.

Usage: ``python benchmarks/tx_bench.py commits|pending|steps|all [--seconds 5] [--rounds 2] [--out NAME]``
(``all``: commits and pending).
The machine is shared: compare figures of one run only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from tests.conftest import subprocess_env  # noqa: E402
from tests.integration.grpc_harness import BrokerProcess  # noqa: E402

from txmq import native  # noqa: E402
from txmq.server.runtime import install_uvloop  # noqa: E402

BODY = os.urandom(512).hex().encode()  # 1 KB
PRODUCERS = 8
WARMUP_S = 1.0
TRANSPORTS = ("native", "grpc-official", "grpc-sdk", "native-many")
PENDING_TIMEOUT = "30m"  # prefilled halves stay "not yet due" for the whole measurement
SEND_GOAL = 0.9
NATIVE_GOAL_TX_S = 9_000


# ---- workers (subprocesses: `tx_bench.py --worker KIND ...`) ----------------------------------------
def _worker_main(args: argparse.Namespace) -> None:
    """One producer process: connect, print READY, wait for the start time on stdin, loop, print JSON."""
    if args.worker == "grpc-official":
        result = _official_worker(args)
    else:
        install_uvloop()
        result = asyncio.run(_sdk_worker(args))
    print(json.dumps(result), flush=True)


def _wait_for_start() -> float:
    print("READY", flush=True)
    return float(sys.stdin.readline())


class _Timed:
    """Counts completions inside the measured window [start + warm-up, start + warm-up + seconds)."""

    def __init__(self, start: float, seconds: float) -> None:
        self.begin, self.end = start + WARMUP_S, start + WARMUP_S + seconds
        self.start = start
        self.in_window = self.total = 0
        self.latencies: list[float] = []
        self.cpu_begin: float | None = None
        self.cpu_end = 0.0

    def running(self) -> bool:
        now = time.time()
        if self.cpu_begin is None and now >= self.begin:
            self.cpu_begin = time.process_time()
        if now < self.end:
            return True
        self.cpu_end = time.process_time()
        return False

    def window_cpu_s(self) -> float:
        return self.cpu_end - (self.cpu_begin if self.cpu_begin is not None else self.cpu_end)

    def done(self, t0: float) -> None:
        now = time.time()
        self.total += 1
        if self.begin <= now < self.end:
            self.in_window += 1
            self.latencies.append((now - t0) * 1000)


async def _sdk_worker(args: argparse.Namespace) -> dict[str, Any]:
    from txmq.client import LocalTransactionState, Message, TransactionProducer

    local_s = 0.0
    executed: set[str] = set()
    checks = 0

    class Commit:
        """Commits every transaction; a check-back commits only what was executed (a half orphaned by a
        retried send was never executed: rolled back, as a transaction table would answer)."""

        def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
            nonlocal local_s
            t0 = time.perf_counter()
            executed.add(msg.transaction_id)  # no real work: local transaction time excluded
            local_s += time.perf_counter() - t0
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: Any) -> LocalTransactionState:
            nonlocal checks
            checks += 1
            if msg.transaction_id in executed:
                return LocalTransactionState.COMMIT_MESSAGE
            return LocalTransactionState.ROLLBACK_MESSAGE

    transport: Literal["grpc", "remoting"] = "grpc" if args.worker == "grpc-sdk" else "remoting"
    inflight = args.inflight if args.worker == "native-many" else 1
    async with TransactionProducer(args.group, Commit(), args.endpoint, transport=transport) as producer:
        await producer.send_message_in_transaction(Message(args.topic, BODY), None)  # connect, route
        timed = _Timed(await asyncio.get_running_loop().run_in_executor(None, _wait_for_start), args.seconds)
        await asyncio.sleep(max(0.0, timed.start - time.time()))

        async def loop() -> None:
            while timed.running():
                t0 = time.time()
                _half, state = await producer.send_message_in_transaction(Message(args.topic, BODY), None)
                if state is not LocalTransactionState.COMMIT_MESSAGE:
                    raise RuntimeError(f"transaction ended {state}")
                timed.done(t0)

        await asyncio.gather(*(loop() for _ in range(inflight)))
    result = {"in_window": timed.in_window, "total": timed.total + 1, "local_s": local_s, "checks": checks}
    return {**result, "cpu_s": timed.window_cpu_s(), "lat": timed.latencies}


def _official_worker(args: argparse.Namespace) -> dict[str, Any]:
    import rocketmq as rmq  # HOME is a temp dir (the client writes logs there)

    class Checker(rmq.TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> Any:
            return rmq.TransactionResolution.COMMIT

    config = rmq.ClientConfiguration(args.endpoint, rmq.Credentials(), request_timeout=10)
    producer = rmq.Producer(config, (args.topic,), Checker())
    producer.startup()

    def message() -> Any:
        msg = rmq.Message()
        msg.topic = args.topic
        msg.body = BODY
        return msg

    try:
        first = producer.begin_transaction()
        producer.send(message(), first)
        first.commit()
        timed = _Timed(_wait_for_start(), args.seconds)
        time.sleep(max(0.0, timed.start - time.time()))
        while timed.running():
            t0 = time.time()
            transaction = producer.begin_transaction()
            producer.send(message(), transaction)
            transaction.commit()  # local transaction: none (time excluded)
            timed.done(t0)
    finally:
        producer.shutdown()
    result = {"in_window": timed.in_window, "total": timed.total + 1, "local_s": 0.0, "checks": 0}
    return {**result, "cpu_s": timed.window_cpu_s(), "lat": timed.latencies}


# ---- the parent ------------------------------------------------------------------------------------
def _topic_count(broker: BrokerProcess, topic: str) -> int:
    try:
        described = broker.admin("topic.describe", {"name": topic})
    except Exception:
        return 0
    return sum(q["max_offset"] - q["min_offset"] for q in described["queue_offsets"])


def run_commits(
    broker: BrokerProcess, transport: str, seconds: float, tag: str, home: Path, inflight: int = 1
) -> dict[str, Any]:
    """8 producer processes with one transaction in flight each (``native-many``: ``inflight`` each);
    committed transactions per second."""
    topic, group = f"TxBench{tag}", f"pg{tag}"
    endpoint = broker.endpoint if transport.startswith("grpc") else f"127.0.0.1:{broker.namesrv_port}"
    before = _topic_count(broker, topic)
    command = [
        sys.executable, str(Path(__file__).resolve()), "--worker", transport, "--endpoint", endpoint,
        "--topic", topic, "--group", group, "--seconds", str(seconds), "--inflight", str(inflight),
    ]  # fmt: skip
    logs = [home / f"worker-{tag}-{k}.log" for k in range(PRODUCERS)]
    workers = []
    for log in logs:
        with open(log, "w") as stderr:
            workers.append(
                subprocess.Popen(
                    command,
                    env=subprocess_env(home),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                )
            )
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            if line.strip() != "READY":
                raise RuntimeError(f"a {transport} worker failed to start: {line!r}")
        start = time.time() + 0.3
        cpu0 = _cpu(broker)
        spy = _py_spy(PY_SPY_DIR, broker, tag, seconds)
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{start}\n")
            worker.stdin.flush()
        results = []
        for worker, log in zip(workers, logs, strict=True):
            try:
                out, _ = worker.communicate(timeout=seconds + 120)
            except subprocess.TimeoutExpired:
                raise RuntimeError(
                    f"a {transport} producer hung: {_dump(worker.pid)}\n{log.read_text()[-2000:]}"
                ) from None
            results.append(json.loads(out.strip().splitlines()[-1]))
        cpu = _cpu(broker) - cpu0
        if spy is not None:
            spy.wait()
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    total = sum(r["total"] for r in results)
    committed = _wait_count(broker, topic, before + total) - before
    latencies = [x for r in results for x in r["lat"]]
    done = sum(r["in_window"] for r in results)
    qs = statistics.quantiles(latencies, n=100) if len(latencies) >= 100 else [0.0] * 99
    return {
        "transport": transport,
        "inflight_per_producer": inflight if transport == "native-many" else 1,
        "tx_per_s": done / seconds,
        "transactions": total,
        "committed_on_broker": committed,
        "commit_check": committed == total,
        "p50_ms": qs[49],
        "p99_ms": qs[98],
        "local_tx_s_total": sum(r["local_s"] for r in results),
        "checks_answered": sum(r["checks"] for r in results),
        "producers_cpu_cores": sum(r["cpu_s"] for r in results) / seconds,
        "producers_cpu_us_per_tx": sum(r["cpu_s"] for r in results) / max(1, done) * 1e6,
        "broker_cpu_s_per_s": cpu / (seconds + WARMUP_S + 0.3),
        "broker_cpu_us_per_tx": cpu / max(1, total) * 1e6,
    }


PY_SPY_DIR = ""  # --py-spy DIR: sample the broker during every commits window


def _py_spy(out_dir: str, broker: BrokerProcess, tag: str, seconds: float) -> Any:
    if not out_dir or broker.proc is None:
        return None
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    command = [
        str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(broker.proc.pid), "--nonblocking",
        "--format", "raw", "--rate", "250", "--duration", str(int(seconds + WARMUP_S)),
        "-o", f"{out_dir}/{tag}.txt",
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _dump(pid: int) -> str:
    """The stacks of a hung producer (py-spy), for the error message."""
    spy = Path(sys.executable).parent / "py-spy"
    done = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, check=False)
    return done.stdout[-4000:] or done.stderr[-1000:]


def _cpu(broker: BrokerProcess) -> float:
    assert broker.proc is not None
    times = psutil.Process(broker.proc.pid).cpu_times()
    return float(times.user + times.system)


def _wait_count(broker: BrokerProcess, topic: str, expected: int, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    count = _topic_count(broker, topic)
    while count < expected and time.monotonic() < deadline:
        time.sleep(0.2)
        count = _topic_count(broker, topic)
    return count


@contextmanager
def broker_process(root: Path, *extra: str) -> Iterator[BrokerProcess]:
    process = BrokerProcess(root, extra_args=["--flush", "sync", *extra])
    process.start()
    try:
        yield process
    finally:
        process.stop()


def commits(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    transports = args.transports.split(",")
    runs: list[dict[str, Any]] = []
    with broker_process(tmp / "commits") as broker:
        for rnd in range(args.rounds):
            for transport in transports:
                tag = f"{transport.replace('-', '')}{rnd}"
                run = run_commits(broker, transport, args.seconds, tag, tmp, args.inflight)
                run["round"] = rnd
                runs.append(run)
                _print_commits(run)
    summary = {t: statistics.median(r["tx_per_s"] for r in runs if r["transport"] == t) for t in transports}
    for transport, rate in summary.items():
        goal = f"  (goal >= {NATIVE_GOAL_TX_S:,}: {'met' if rate >= NATIVE_GOAL_TX_S else 'NOT met'})"
        print(f"median {transport:<14} {rate:>9,.0f} committed tx/s{goal if transport == 'native' else ''}")
    return {"runs": runs, "median_tx_per_s": summary}


def _print_commits(run: dict[str, Any]) -> None:
    print(
        f"{run['transport']:<14} round {run['round']}: {run['tx_per_s']:>8,.0f} tx/s  "
        f"p50 {run['p50_ms']:.2f} "
        f"p99 {run['p99_ms']:.2f} ms  CPU: broker {run['broker_cpu_s_per_s']:.2f} cores "
        f"({run['broker_cpu_us_per_tx']:.0f} us/tx), producers "
        f"{run['producers_cpu_cores']:.2f} cores ({run['producers_cpu_us_per_tx']:.0f} us/tx); "
        f"checks {run['checks_answered']}; committed "
        f"{run['committed_on_broker']}/{run['transactions']} {'ok' if run['commit_check'] else 'MISMATCH'}",
        flush=True,
    )


# ---- the broker's steps, in process -----------------------------------------------------------------
async def step_costs(count: int, reps: int) -> dict[str, Any]:
    """Thread CPU per transaction of the half send and of the END_TRANSACTION commit (see the docstring)."""
    from txmq.broker.broker import Broker
    from txmq.broker.config import BrokerConfig
    from txmq.broker.send import SendContext
    from txmq.common.message import Message
    from txmq.storage.api import FlushMode

    samples: dict[str, list[float]] = {"half_send": [], "end_commit": []}
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.ASYNC))
        ctx = SendContext(producer_group="pgSteps", born_host="127.0.0.1:5555")
        try:
            for rep in range(reps + 1):  # the first is a warm-up
                c0 = time.thread_time()
                halves = [
                    (await broker.send([Message("StepTopic", BODY, transactional=True)], ctx))[0]
                    for _ in range(count)
                ]
                c1 = time.thread_time()
                for half in halves:
                    txid = half.transaction_id or ""
                    await broker.end_transaction(
                        topic="StepTopic", message_id=half.message_id, transaction_id=txid, commit=True,
                        from_check=False,
                    )  # fmt: skip
                c2 = time.thread_time()
                if rep:
                    samples["half_send"].append((c1 - c0) / count * 1e6)
                    samples["end_commit"].append((c2 - c1) / count * 1e6)
        finally:
            await broker.close()
    result: dict[str, Any] = {"count": count, "reps": reps}
    for step, values in samples.items():
        values.sort()
        figures = {"min": values[0], "q1": values[len(values) // 4], "median": statistics.median(values)}
        result[f"{step}_us"] = figures
        print(
            f"{step:<11} us/tx: min {figures['min']:6.1f}  q1 {figures['q1']:6.1f}  "
            f"median {figures['median']:6.1f}",
            flush=True,
        )
    return result


# ---- pending half messages -------------------------------------------------------------------------
async def prefill_halves(data_dir: Path, count: int) -> dict[str, Any]:
    """``count`` undecided half messages, written in process as the send path would write them."""
    from txmq.broker.broker import Broker
    from txmq.broker.config import BrokerConfig
    from txmq.broker.send import SendContext
    from txmq.common.message import Message
    from txmq.storage.api import FlushMode

    config = BrokerConfig(data_dir=str(data_dir), flush=FlushMode.ASYNC)
    broker = await Broker.open(config)
    ctx = SendContext(producer_group="pgPending", born_host="127.0.0.1")
    start = time.perf_counter()
    try:
        written = 0
        while written < count:
            chunk = min(1_000, count - written)
            # Broker.send takes one transactional message per call; the records are the same (its own
            # preparation), appended a thousand per write so a million take seconds, not minutes
            requests = [
                broker.sender.prepare(Message("PendingTopic", BODY, transactional=True), ctx)[1]
                for _ in range(chunk)
            ]
            await broker.store.put_batch(requests)
            written += chunk
    finally:
        await broker.close()
    elapsed = time.perf_counter() - start
    print(f"prefilled {count:,} half messages in {elapsed:.1f} s ({count / elapsed:,.0f}/s)", flush=True)
    return {"halves": count, "seconds": elapsed}


async def tick_costs(prefilled: Path, empty: Path, rounds: int) -> dict[str, Any]:
    """Time check-service rounds in process on both data dirs (interleaved A B A B)."""
    from txmq.broker.broker import Broker
    from txmq.broker.config import BrokerConfig
    from txmq.storage.api import FlushMode

    result: dict[str, Any] = {}
    brokers = {}
    for name, path in (("prefilled", prefilled), ("empty", empty)):
        config = BrokerConfig(data_dir=str(path), flush=FlushMode.SYNC, transaction_timeout_ms=30 * 60_000)
        t0 = time.perf_counter()
        brokers[name] = await Broker.open(config)
        result[f"{name}_open_s"] = time.perf_counter() - t0
    samples: dict[str, list[float]] = {name: [] for name in brokers}
    cpu: dict[str, float] = dict.fromkeys(brokers, 0.0)
    try:
        for _ in range(rounds):
            for name, broker in brokers.items():
                c0, t0 = time.process_time(), time.perf_counter()
                await broker.transactions.tick(broker.clock.now_ms())
                samples[name].append((time.perf_counter() - t0) * 1e6)
                cpu[name] += time.process_time() - c0
    finally:
        for broker in brokers.values():
            await broker.close()
    for name, values in samples.items():
        result[f"{name}_round_us_median"] = statistics.median(values)
        result[f"{name}_round_us_p99"] = statistics.quantiles(values, n=100)[98]
        result[f"{name}_round_cpu_us_mean"] = cpu[name] / rounds * 1e6
    print(
        f"check-service round (tick), {rounds} rounds each: prefilled median "
        f"{result['prefilled_round_us_median']:.0f} us (p99 {result['prefilled_round_us_p99']:.0f}), empty "
        f"{result['empty_round_us_median']:.0f} us (p99 {result['empty_round_us_p99']:.0f}); broker open "
        f"{result['prefilled_open_s']:.2f} s vs {result['empty_open_s']:.2f} s",
        flush=True,
    )
    return result


async def pipelined_sends(port: int, seconds: float, inflight: int = 64) -> float:
    from tests.integration.remoting_support import send_header

    from txmq.protocol.remoting.codes import RequestCode, ResponseCode
    from txmq.server.remoting_transport import connect

    endpoint = await connect("127.0.0.1", port)
    fields = [send_header("PendingSends", {"TAGS": "bench"}, queue_id=q) for q in range(4)]
    done = 0

    async def one(k: int, stop_at: float, counted: bool) -> None:
        nonlocal done
        i = k
        while time.perf_counter() < stop_at:
            reply = await endpoint.request_nowait(RequestCode.SEND_MESSAGE_V2, fields[i % 4], BODY)
            if reply.code != ResponseCode.SUCCESS:
                raise RuntimeError(reply.remark)
            i += 1
            done += counted

    try:
        await asyncio.gather(*(one(k, time.perf_counter() + 0.5, False) for k in range(inflight)))
        start = time.perf_counter()
        await asyncio.gather(*(one(k, start + seconds, True) for k in range(inflight)))
        return done / (time.perf_counter() - start)
    finally:
        await endpoint.close()


def idle_cpu(broker: BrokerProcess, seconds: float = 3.0) -> float:
    c0 = _cpu(broker)
    time.sleep(seconds)
    return (_cpu(broker) - c0) / seconds


def pending(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    prefilled, empty = tmp / "prefilled", tmp / "empty"
    document: dict[str, Any] = {"prefill": asyncio.run(prefill_halves(prefilled / "data", args.halves))}
    asyncio.run(_touch_empty(empty / "data"))
    document["check_rounds"] = asyncio.run(tick_costs(prefilled / "data", empty / "data", args.tick_rounds))
    runs: list[dict[str, Any]] = []
    extra = ("--transaction-timeout", PENDING_TIMEOUT)
    with broker_process(prefilled, *extra) as full, broker_process(empty, *extra) as bare:
        count = _topic_count(full, "RMQ_SYS_TRANS_HALF_TOPIC")
        print(f"broker on the prefilled data dir holds {count:,} half messages", flush=True)
        document["halves_seen_by_broker"] = count
        for name, broker in (("prefilled", full), ("empty", bare)):
            document[f"{name}_idle_cpu_cores"] = idle_cpu(broker)
        for rnd in range(args.rounds):
            for name, broker in (("prefilled", full), ("empty", bare)):
                rate = asyncio.run(pipelined_sends(broker.remoting_port, args.seconds))
                runs.append({"workload": "pipelined-64", "broker": name, "round": rnd, "msg_per_s": rate})
                print(
                    f"pipelined sends, 64 in flight, {name:<9} round {rnd}: {rate:>9,.0f} msg/s", flush=True
                )
        for rnd in range(args.rounds):
            for name, broker in (("prefilled", full), ("empty", bare)):
                run = run_commits(broker, "native", args.seconds, f"pending{name}{rnd}", tmp)
                runs.append(
                    {"workload": "tx-native-8", "broker": name, "round": rnd, "msg_per_s": run["tx_per_s"]}
                )
                print(
                    f"native tx, 8 producers, {name:<9} round {rnd}: {run['tx_per_s']:>9,.0f} tx/s",
                    flush=True,
                )
    ratios = {}
    for workload in ("pipelined-64", "tx-native-8"):
        med = {
            b: statistics.median(
                r["msg_per_s"] for r in runs if r["workload"] == workload and r["broker"] == b
            )
            for b in ("prefilled", "empty")
        }
        ratios[workload] = med["prefilled"] / med["empty"]
        verdict = "met" if ratios[workload] >= SEND_GOAL else "NOT met"
        print(
            f"{workload}: prefilled {med['prefilled']:,.0f} / empty {med['empty']:,.0f} = "
            f"{ratios[workload]:.2f} (goal >= {SEND_GOAL}: {verdict})"
        )
    print(
        f"idle broker CPU: prefilled {document['prefilled_idle_cpu_cores']:.3f} cores, empty "
        f"{document['empty_idle_cpu_cores']:.3f} cores"
    )
    document.update(runs=runs, ratios=ratios)
    return document


async def _touch_empty(data_dir: Path) -> None:
    from txmq.broker.broker import Broker
    from txmq.broker.config import BrokerConfig

    broker = await Broker.open(BrokerConfig(data_dir=str(data_dir)))
    await broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", nargs="?", choices=("commits", "pending", "steps", "all"), default="all")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--halves", type=int, default=1_000_000)
    parser.add_argument("--tick-rounds", type=int, default=200)
    parser.add_argument("--inflight", type=int, default=8, help="transactions in flight, native-many")
    parser.add_argument("--count", type=int, default=500, help="transactions per repetition, steps")
    parser.add_argument("--reps", type=int, default=12, help="repetitions, steps")
    parser.add_argument("--out", default="")
    parser.add_argument("--py-spy", default="", help="sample the broker with py-spy into this directory")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    parser.add_argument("--topic", default="", help=argparse.SUPPRESS)
    parser.add_argument("--group", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker_main(args)
        return
    global PY_SPY_DIR
    PY_SPY_DIR = args.py_spy
    document: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "native": native.summary(),
        "note": "shared machine (other jobs running): compare figures within this run only",
    }
    print(document["native"], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ["HOME"] = str(home)  # the official client writes logs under HOME
        if args.what in ("commits", "all"):
            document["commits"] = commits(args, home)
        if args.what in ("pending", "all"):
            document["pending"] = pending(args, home)
        if args.what == "steps":
            document["steps"] = asyncio.run(step_costs(args.count, args.reps))
    out = ROOT / "benchmarks" / "results" / "tx" / f"{args.out or time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main()
