"""The ``txmq`` writer when Spark retries a task: each row is visible exactly once.

The session runs ``local[2,3]``, so a failed task is retried (as on a cluster). The first attempt of
every write task fails after sending (see :mod:`tests.spark.flaky_sink`): one kind rolls its halves
back as it fails, the other dies with them pending and leaves them to check-back, which rolls them back
because the batch's marker names only the attempts whose commit messages reached the driver.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.client.broker import BrokerProcess
from tests.client.topic_reader import read_topic
from tests.spark.conftest import new_topic
from tests.spark.helpers import produce
from txmq.cli.admin_client import call
from txmq.spark.sink_log import read_record, run_resolver
from txmq.spark.sink_plan import parse_sink_options

ROWS = 40


def _register_flaky(spark: Any) -> None:
    from pyspark import cloudpickle

    from tests.spark import flaky_sink

    cloudpickle.register_pickle_by_value(sys.modules[flaky_sink.__name__])
    spark.dataSource.register(flaky_sink.FlakySource)


def _settle_and_read(broker: BrokerProcess, options: dict[str, str], streaming: bool) -> list[bytes]:
    """Answer check-backs until no half of the sink is pending, then every body of the target topic."""
    sink = parse_sink_options(options, streaming=streaming)
    stop = threading.Event()

    def resolve() -> None:
        async def run() -> None:
            done = asyncio.Event()
            task = asyncio.get_running_loop().create_task(run_resolver(sink, done))
            while not stop.is_set():
                await asyncio.sleep(0.1)
            done.set()
            await task

        asyncio.run(run())

    resolver = threading.Thread(target=resolve)
    resolver.start()
    try:
        deadline = time.monotonic() + 120
        while pending := [t for t in call(broker.grpc, "tx.list", {}) if t["producer_group"] == sink.group]:
            assert time.monotonic() < deadline, f"halves never settled: {pending[:3]}"
            time.sleep(0.3)
    finally:
        stop.set()
        resolver.join()
    assert sink.topic is not None
    return sorted(m.body for m in read_topic(broker.namesrv, sink.topic))


def _attempts(flaky_dir: Path) -> set[str]:
    return {p.name for p in flaky_dir.iterdir()}


def test_batch_write_with_retried_tasks_is_exactly_once(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    _register_flaky(spark)
    target, flaky_dir = new_topic(spark_broker, queues=2), tmp_path / "attempts"
    flaky_dir.mkdir()
    options = {
        "endpoints": spark_broker.namesrv, "topic": target, "sinkId": f"retry-{target}",
        "checkImmunitySeconds": "1", "flakyDir": str(flaky_dir),
    }  # fmt: skip
    df = spark.createDataFrame([(f"row-{i}",) for i in range(ROWS)], "body string").repartition(2)
    df.write.format("txmq_flaky").options(**options).mode("append").save()
    assert _attempts(flaky_dir) == {"p0-a0", "p0-a1", "p1-a0", "p1-a1"}  # every fault fired, once
    assert _settle_and_read(spark_broker, options, streaming=False) == sorted(
        f"row-{i}".encode() for i in range(ROWS)
    )
    record = asyncio.run(read_record(parse_sink_options(options, streaming=False)))
    assert [len(m.tokens) for m in record.markers.values()] == [2]  # the two retried attempts only


def test_stream_write_with_retried_tasks_is_exactly_once(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    _register_flaky(spark)
    source, target = new_topic(spark_broker, queues=2), new_topic(spark_broker, queues=2)
    produce(spark_broker, source, [f"m{i}" for i in range(ROWS)])
    flaky_dir = tmp_path / "attempts"
    flaky_dir.mkdir()
    options = {
        "endpoints": spark_broker.namesrv, "topic": target, "checkpointLocation": str(tmp_path / "chk"),
        "checkImmunitySeconds": "1", "flakyDir": str(flaky_dir),
    }  # fmt: skip
    stream = (
        spark.readStream.format("txmq").option("endpoints", spark_broker.namesrv).option("topic", source)
        .option("startingOffsets", "earliest").load().selectExpr("body")
    )  # fmt: skip
    query = stream.writeStream.format("txmq_flaky").options(**options).trigger(availableNow=True).start()
    assert query.awaitTermination(180), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    assert {"p0-a0", "p0-a1", "p1-a0", "p1-a1"} <= _attempts(flaky_dir)
    # what the source holds (a producer's retried send may have stored a row twice: at-least-once)
    expected = sorted(m.body for m in read_topic(spark_broker.namesrv, source))
    assert set(expected) == {f"m{i}".encode() for i in range(ROWS)}
    got = _settle_and_read(spark_broker, options, streaming=True)
    if got != expected:  # which attempt, row and try each copy of a duplicated row came from
        tags = [
            (
                m.body,
                m.message_id,
                m.queue_offset,
                dict(m.properties),
                m.properties.get("__transactionId__") or m.transaction_id,
            )
            for m in read_topic(spark_broker.namesrv, target)
            if got.count(m.body) > expected.count(m.body)
        ]
        shows = [call(spark_broker.grpc, "tx.show", {"id": t[-1]}) for t in tags if t[-1]]
        raise AssertionError(f"target differs from source; duplicated: {tags}; transactions: {shows}")
