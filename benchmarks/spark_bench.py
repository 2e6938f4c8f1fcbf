"""Read throughput of the ``txmq`` Spark source into a no-op sink, on ``local[2]``.

Starts a broker subprocess (async flush), creates a topic with ``--queues`` queues, preloads
``--messages`` messages of ``--size`` bytes (batch sends, untimed), then:

1. times SparkSession start-up (the JVM) and the first tiny read (the first Python workers) separately;
2. reads the whole topic ``--rounds`` times into ``format("noop")`` alternating Arrow record batches and
   Python tuples (A B A B), and prints messages/s for each run and the median per mode;
3. as references, times the same pulls without Spark (one process, queue after queue), and the
   executor-side conversion alone (messages to Arrow batches vs Spark's conversion of tuples), to show
   how much of the cost is the broker and the pull path rather than Spark.

    python benchmarks/spark_bench.py [--messages 200000] [--size 1024] [--queues 4] [--rounds 2]
        [--min-partitions 0,8]   # each mode also with the read cut into >= N tasks (0: one per queue)
        [--tiny-reads 2]         # then reads of 10 messages per queue: a query's fixed wall and CPU cost
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# --src PATH: read with another checkout's txmq (driver and Spark's Python workers), for A/B in one bench
sys.path.insert(
    0,
    sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(Path(__file__).parents[1] / "src"),
)

from tests.client.broker import BrokerProcess
from tests.client.conftest import create_topic

from txmq.client import Message, Producer
from txmq.common.message import MessageQueue
from txmq.spark import offsets as off
from txmq.spark import options as opt
from txmq.spark.fetch import Session

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(sys.path[0]).resolve()


async def preload(broker: BrokerProcess, topic: str, n: int, size: int, queues: int) -> float:
    body = b"x" * size
    per_batch = max(1, min(1000, (3 * 1024 * 1024) // max(size, 1)))
    start = time.perf_counter()
    async with Producer(broker.namesrv, group="spark-bench", send_timeout_s=120) as producer:
        sent = 0
        sem = asyncio.Semaphore(2)

        async def one(q: int, count: int) -> None:
            async with sem:
                await producer.send_batch(
                    [Message(topic, body, keys=(f"k{i}",)) for i in range(count)],
                    queue=MessageQueue(topic, q, "broker-a"),
                )

        tasks = []
        i = 0
        while sent < n:
            count = min(per_batch, n - sent)
            tasks.append(one(i % queues, count))
            sent += count
            i += 1
        await asyncio.gather(*tasks)
    return time.perf_counter() - start


def raw_pull(broker: BrokerProcess, topic: str) -> tuple[int, float]:
    opts = opt.parse({"endpoints": broker.namesrv, "topic": topic}, streaming=False)
    with Session(opts) as session:
        keys = session.queues()
        low, high = session.low_high(keys)
        start = time.perf_counter()
        n = 0
        for key in keys:
            for batch in session.pull_range(off.QueueRange(key[0], key[1], low[key], high[key])):
                n += len(batch)
        return n, time.perf_counter() - start


def pull_to_arrow(broker: BrokerProcess, topic: str, lean: bool) -> tuple[int, float, float]:
    """What a Spark task does without Spark: pull every queue and build the Arrow batches, either
    from ``MessageView``s (``pull_range`` + ``to_arrow``, the path before the lean rows) or from the
    undecoded pull bodies (``pull_columns`` + ``arrow_of``). Messages, seconds, client CPU seconds."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from txmq.spark.rows import arrow_of, to_arrow
    from txmq.spark.source import spark_schema

    arrow_schema = to_arrow_schema(spark_schema(), timezone="UTC")
    opts = opt.parse({"endpoints": broker.namesrv, "topic": topic}, streaming=False)
    with Session(opts) as session:
        keys = session.queues()
        low, high = session.low_high(keys)
        start, cpu = time.perf_counter(), time.process_time()
        n = 0
        for key in keys:
            rng = off.QueueRange(key[0], key[1], low[key], high[key])
            if lean:
                for columns in session.pull_columns(rng):
                    n += arrow_of(columns, arrow_schema).num_rows
            else:
                for views in session.pull_range(rng):
                    n += to_arrow(views, arrow_schema).num_rows
        return n, time.perf_counter() - start, time.process_time() - cpu


def spark_cpu(broker: BrokerProcess) -> tuple[float, float]:
    """CPU seconds of Spark's Python workers (every Python process under the JVM, with the workers they
    already reaped: where the source's read and its planning run) and of the JVM itself. The broker,
    also a Python child of this process, is not counted here (``broker_cpu``)."""
    import psutil

    assert broker.process is not None
    skip = {broker.process.pid}
    workers = jvm = 0.0
    for proc in psutil.Process().children(recursive=True):
        if proc.pid in skip:
            continue
        try:
            name = proc.name()
            t = proc.cpu_times()
        except psutil.Error:
            continue
        if "python" in name:
            workers += t.user + t.system + t.children_user + t.children_system
        elif "java" in name:
            jvm += t.user + t.system
    return workers, jvm


def broker_cpu(broker: BrokerProcess) -> float:
    import psutil

    assert broker.process is not None
    times = psutil.Process(broker.process.pid).cpu_times()
    return float(times.user + times.system)


def conversion(n: int, size: int) -> dict[str, float]:
    """Executor-side cost alone: messages to Arrow batches, ours vs Spark's conversion of tuples (msg/s)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.worker.plan_data_source_read import records_to_arrow_batches

    from txmq.common.message import MessageView
    from txmq.spark.rows import to_arrow, to_tuple
    from txmq.spark.source import TxmqDataSource, spark_schema

    schema = spark_schema()
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    views = [
        MessageView(
            topic="T",
            body=b"x" * size,
            message_id=f"id{i}",
            queue_id=i % 4,
            queue_offset=i,
            commit_log_offset=i * size,
            born_timestamp_ms=1_700_000_000_000 + i,
            store_timestamp_ms=1_700_000_000_001 + i,
            tags="t",
            keys=(f"k{i}",),
            properties={"UNIQ_KEY": "x"},
        )
        for i in range(n)
    ]
    chunks = [views[i : i + 1024] for i in range(0, n, 1024)]
    t0 = time.perf_counter()
    for chunk in chunks:
        to_arrow(chunk, arrow_schema)
    arrow = n / (time.perf_counter() - t0)
    source = TxmqDataSource({"endpoints": "x:1", "topic": "T"})
    t0 = time.perf_counter()
    for _ in records_to_arrow_batches((to_tuple(v) for v in views), 10_000, schema, source):
        pass
    tuples = n / (time.perf_counter() - t0)
    return {"arrow": arrow, "tuples": tuples}


def spark_session() -> Any:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(SRC), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    )
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("txmq-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="arrow,tuples")
    parser.add_argument(
        "--min-partitions",
        default="0",
        help="comma list of the source's minPartitions to alternate (0: not set, one task per queue)",
    )
    parser.add_argument("--no-raw", action="store_true", help="skip the pull-without-Spark reference")
    parser.add_argument(
        "--tiny-reads",
        type=int,
        default=2,
        help="after the rounds, time this many reads of 10 messages per queue: a query's fixed cost",
    )
    parser.add_argument(
        "--raw-only", action="store_true", help="only the pull-without-Spark reference (with broker CPU/msg)"
    )
    parser.add_argument("--src", help="the txmq sources to read with (another checkout's src, for A/B)")
    parser.add_argument(
        "--arrow-ab",
        action="store_true",
        help="only pull + Arrow without Spark, MessageView path vs lean rows alternating (client CPU/msg)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), "--flush", "async", "--default-queues", str(args.queues))
        broker.start()
        try:
            topic = "SparkBench"
            asyncio.run(create_topic(broker, topic, args.queues))
            took = asyncio.run(preload(broker, topic, args.messages, args.size, args.queues))
            print(f"preloaded {args.messages} x {args.size} B into {args.queues} queues in {took:.1f} s")
            if not args.no_raw:
                for _ in range(2 if args.raw_only else 1):
                    cpu = broker_cpu(broker)
                    n, secs = raw_pull(broker, topic)
                    per = (broker_cpu(broker) - cpu) / max(n, 1) * 1e6
                    print(f"pull without Spark (one process): {n} in {secs:.2f} s = {n / secs:,.0f} msg/s, "
                          f"broker CPU {per:.1f} us/msg")  # fmt: skip
            if args.raw_only:
                return
            if args.arrow_ab:
                rates: dict[str, list[tuple[float, float]]] = {}
                for _ in range(args.rounds):
                    for name, lean in (("views", False), ("lean", True)):
                        cpu = broker_cpu(broker)
                        n, secs, client = pull_to_arrow(broker, topic, lean)
                        per = (broker_cpu(broker) - cpu) / max(n, 1) * 1e6
                        rates.setdefault(name, []).append((n / secs, client / max(n, 1) * 1e6))
                        print(f"pull + Arrow without Spark, {name:5s}: {n} in {secs:.2f} s = "
                              f"{n / secs:,.0f} msg/s, client CPU {client / n * 1e6:.1f} us/msg, "
                              f"broker CPU {per:.1f} us/msg")  # fmt: skip
                for name, runs in rates.items():
                    print(f"median {name:5s}: {statistics.median(r for r, _ in runs):,.0f} msg/s, client CPU "
                          f"{statistics.median(c for _, c in runs):.1f} us/msg")  # fmt: skip
                return

            conversion(5_000, args.size)  # warm-up: imports, first allocations
            for mode, rate in conversion(min(args.messages, 50_000), args.size).items():
                print(f"conversion only (no broker, no JVM), {mode:6s}: {rate:,.0f} msg/s")

            t0 = time.perf_counter()
            spark = spark_session()
            jvm = time.perf_counter() - t0
            spark.sparkContext.setLogLevel("ERROR")
            import txmq.spark

            txmq.spark.register(spark)
            t0 = time.perf_counter()
            warm = spark.read.format("txmq").option("endpoints", broker.namesrv).option("topic", topic)
            tiny = {topic: {str(q): 10 for q in range(args.queues)}}  # queues not named would read to the end
            warm.option("endingOffsets", json.dumps(tiny)).load().count()
            first = time.perf_counter() - t0
            print(f"SparkSession start (JVM): {jvm:.1f} s; first read (Python workers): {first:.1f} s")

            results: dict[str, list[float]] = {}
            worker_cpus: dict[str, list[float]] = {}
            totals: dict[str, list[float]] = {}
            runs = [
                (mode if split == "0" else f"{mode}/p{split}", mode, split)
                for mode in args.modes.split(",")
                for split in args.min_partitions.split(",")
            ]
            for r in range(args.rounds):
                for label, mode, split in runs:
                    reader = (
                        spark.read.format("txmq")
                        .option("endpoints", broker.namesrv)
                        .option("topic", topic)
                        .option("arrow", "true" if mode == "arrow" else "false")
                    )
                    if split != "0":
                        reader = reader.option("minPartitions", split)
                    df = reader.load()
                    t0, (workers, jvm), brk = time.perf_counter(), spark_cpu(broker), broker_cpu(broker)
                    df.write.format("noop").mode("overwrite").save()
                    secs = time.perf_counter() - t0
                    workers_after, jvm_after = spark_cpu(broker)
                    workers = (workers_after - workers) / args.messages * 1e6
                    jvm = (jvm_after - jvm) / args.messages * 1e6
                    brk = (broker_cpu(broker) - brk) / args.messages * 1e6
                    rate = args.messages / secs
                    results.setdefault(label, []).append(rate)
                    worker_cpus.setdefault(label, []).append(workers)
                    totals.setdefault(label, []).append(workers + jvm + brk)
                    print(f"round {r + 1} {label:9s}: {args.messages} in {secs:.2f} s = {rate:,.0f} msg/s, "
                          f"CPU us/msg: Python workers {workers:.1f}, JVM {jvm:.1f}, "
                          f"broker {brk:.1f}, total {workers + jvm + brk:.1f}")  # fmt: skip
            for _ in range(args.tiny_reads):
                t0, (workers, jvm), brk = time.perf_counter(), spark_cpu(broker), broker_cpu(broker)
                small = warm.option("endingOffsets", json.dumps(tiny)).load()
                small.write.format("noop").mode("overwrite").save()
                secs = time.perf_counter() - t0
                workers_after, jvm_after = spark_cpu(broker)
                print(f"fixed cost, a read of {10 * args.queues} messages: {secs:.2f} s; CPU s: "
                      f"Python workers {workers_after - workers:.2f}, JVM {jvm_after - jvm:.2f}, "
                      f"broker {broker_cpu(broker) - brk:.2f}")  # fmt: skip
            for mode, rates in results.items():
                print(f"median {mode:9s}: {statistics.median(rates):,.0f} msg/s, Python workers "
                      f"{statistics.median(worker_cpus[mode]):.1f} us/msg, all processes "
                      f"{statistics.median(totals[mode]):.1f} us/msg")  # fmt: skip
            print(f"load average at the end: {os.getloadavg()}")
            spark.stop()
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
