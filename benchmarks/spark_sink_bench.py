"""Write throughput of the exactly-once ``txmq`` Spark sink, 1 KB rows, on ``local[2]``.

Starts a broker subprocess (``--flush`` async by default, as the source benchmark), then alternates
(A B C A B C) three ways of getting ``--rows`` rows of ``--size`` bytes committed into a topic:

* ``spark``: ``df.write.format("txmq")`` on a DataFrame of ``--partitions`` partitions (executor tasks
  send half messages, the driver records the job's marker and commits every half);
* ``sdk``: the same executor and driver steps (:mod:`txmq.spark.sink_log`) called directly in one
  process, ``--partitions`` tasks concurrently: what the sink costs without Spark;
* ``plain``: ordinary non-transactional sends of the same rows (256 in flight): the broker's baseline.

Every run's rows are counted back from the broker (must equal ``--rows``). SparkSession start-up and a
first tiny write (Python workers starting) are timed separately and excluded.

    python benchmarks/spark_sink_bench.py [--rows 20000] [--size 1024] [--partitions 2] [--rounds 2]
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tests.client.broker import BrokerProcess
from tests.client.conftest import create_topic
from tests.client.topic_reader import read_topic

from txmq.client import Producer
from txmq.common.message import Message
from txmq.spark.sink_log import finish_epoch, send_task
from txmq.spark.sink_plan import parse_sink_options

ROOT = Path(__file__).resolve().parents[1]


def session() -> Any:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import txmq.spark

    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false").config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    txmq.spark.register(spark)
    return spark


def spark_write(spark: Any, broker: BrokerProcess, topic: str, rows: int, size: int, parts: int) -> float:
    df = spark.range(0, rows, 1, parts).selectExpr(
        f"repeat('x', {size}) as body", "cast(id as string) as keys"
    )
    df.cache().count()  # the DataFrame itself is not what is measured
    start = time.perf_counter()
    df.write.format("txmq").option("endpoints", broker.namesrv).option("topic", topic).mode("append").save()
    elapsed = time.perf_counter() - start
    df.unpersist()
    return elapsed


def sdk_write(broker: BrokerProcess, topic: str, rows: int, size: int, parts: int) -> float:
    options = parse_sink_options({"endpoints": broker.namesrv, "topic": topic}, streaming=False)
    body = b"x" * size

    async def run() -> None:
        share = rows // parts
        results = await asyncio.gather(
            *(
                send_task(
                    options, f"job-{topic}", p, (Message(topic, body, keys=(str(i),)) for i in range(share))
                )
                for p in range(parts)
            )
        )
        await finish_epoch(options, f"job-{topic}", list(results))

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


def plain_write(broker: BrokerProcess, topic: str, rows: int, size: int) -> float:
    """Reference: the same rows as ordinary (non-transactional) sends, 256 in flight, one process."""
    body = b"x" * size

    async def run() -> None:
        async with Producer(broker.namesrv, group="bench-plain") as producer:
            slots = asyncio.Semaphore(256)

            async def one(i: int) -> None:
                async with slots:
                    await producer.send(Message(topic, body, keys=(str(i),)))

            await asyncio.gather(*(one(i) for i in range(rows)))

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--flush", default="async", choices=["sync", "async"])
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="spark-sink-bench-"))
    broker = BrokerProcess(root, "--flush", args.flush)
    broker.start()
    results: dict[str, list[float]] = {"spark": [], "sdk": [], "plain": []}
    try:
        t0 = time.perf_counter()
        spark = session()
        startup = time.perf_counter() - t0
        warm_topic = "warm"
        asyncio.run(create_topic(broker, warm_topic, 4))
        t0 = time.perf_counter()
        spark_write(spark, broker, warm_topic, 10, args.size, args.partitions)
        first = time.perf_counter() - t0
        for rnd in range(args.rounds):
            for mode in ("spark", "sdk", "plain"):
                topic = f"bench_{mode}_{rnd}"
                asyncio.run(create_topic(broker, topic, 4))
                if mode == "spark":
                    elapsed = spark_write(spark, broker, topic, args.rows, args.size, args.partitions)
                elif mode == "sdk":
                    elapsed = sdk_write(broker, topic, args.rows, args.size, args.partitions)
                else:
                    elapsed = plain_write(broker, topic, args.rows, args.size)
                count = len(read_topic(broker.namesrv, topic))
                expected = args.rows if mode != "sdk" else (args.rows // args.partitions) * args.partitions
                assert count == expected, f"{mode}: {count} rows visible, expected {expected}"
                results[mode].append(expected / elapsed)
                print(
                    f"round {rnd} {mode}: {expected} rows, {elapsed:.2f}s, {expected / elapsed:,.0f} rows/s"
                )
        spark.stop()
    finally:
        broker.stop()
    summary = {
        "rows": args.rows, "size": args.size, "partitions": args.partitions, "flush": args.flush,
        "spark_start_s": round(startup, 2), "first_write_s": round(first, 2),
        "median_rows_per_s": {m: round(statistics.median(v)) for m, v in results.items()},
        "runs_rows_per_s": {m: [round(x) for x in v] for m, v in results.items()},
    }  # fmt: skip
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
