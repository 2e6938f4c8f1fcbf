"""The ``txmq`` writer on a real SparkSession and broker: batch and streaming writes, exactly once."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.client.broker import BrokerProcess
from tests.client.topic_reader import read_topic
from tests.conftest import PYTHON, REPO
from tests.spark.conftest import new_topic
from txmq.cli.admin_client import call
from txmq.client import BlockingProducer, Message
from txmq.spark.sink_log import run_resolver
from txmq.spark.sink_plan import default_sink_id, parse_sink_options, producer_group


def _sent(broker: BrokerProcess, topic: str) -> list[bytes]:
    return sorted(m.body for m in read_topic(broker.namesrv, topic))


def test_batch_write_commits_when_the_job_succeeds(spark: Any, spark_broker: BrokerProcess) -> None:
    topic = new_topic(spark_broker, queues=2)
    rows = [(f"row-{i}", f"k{i}", {"n": str(i)}) for i in range(20)]
    df = spark.createDataFrame(rows, "body string, keys string, properties map<string,string>").repartition(2)
    df.write.format("txmq").option("endpoints", spark_broker.namesrv).option("topic", topic).mode(
        "append"
    ).save()
    got = read_topic(spark_broker.namesrv, topic)
    assert sorted(m.body for m in got) == sorted(f"row-{i}".encode() for i in range(20))
    assert all(m.properties["n"] == m.body.decode()[4:] for m in got)


def _pending(broker: BrokerProcess, group: str) -> list[dict[str, Any]]:
    return [t for t in call(broker.grpc, "tx.list", {}) if t["producer_group"] == group]


@pytest.mark.slow
def test_query_killed_before_commit_then_rerun_and_replay(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    """A real kill between the executors' sends and the driver's commit leaves nothing visible; the
    rerun from the checkpoint delivers each row once; a replay of the recorded batch is rolled back;
    the killed attempt's orphans are rolled back by check-back from the marker log."""
    source, target = new_topic(spark_broker, queues=2), new_topic(spark_broker, queues=2)
    with BlockingProducer(spark_broker.namesrv, group="sinkfeed") as producer:
        for i in range(10):
            producer.send(Message(source, f"m{i}".encode(), keys=(f"k{i}",)))
    checkpoint, ready = str(tmp_path / "chk"), tmp_path / "ready"
    job = subprocess.Popen(
        [PYTHON, str(Path(__file__).with_name("sink_crash_job.py")), spark_broker.namesrv, source, target,
         checkpoint, str(ready)],
        env={**os.environ, "PYTHONPATH": os.environ["PYTHONPATH"] + os.pathsep + str(REPO)},
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not ready.exists():
            assert job.poll() is None, job.stderr.read().decode()[-3000:] if job.stderr else ""
            assert time.monotonic() < deadline, "the crash job never reached its commit"
            time.sleep(0.2)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    group = producer_group(default_sink_id(checkpoint))
    assert len(_pending(spark_broker, group)) == 10  # every row sent as a half message ...
    assert _sent(spark_broker, target) == []  # ... and none visible

    options = {"endpoints": spark_broker.namesrv, "topic": target, "checkpointLocation": checkpoint}
    _run_available_now(spark, spark_broker, source, options)
    expected = sorted(f"m{i}".encode() for i in range(10))
    assert _sent(spark_broker, target) == expected

    shutil.rmtree(Path(checkpoint) / "commits")  # Spark will run batch 0 again: a replay
    _run_available_now(spark, spark_broker, source, options)

    stop = threading.Event()
    resolver = threading.Thread(target=_resolve_until, args=(options, stop))
    resolver.start()
    try:
        deadline = time.monotonic() + 60
        while _pending(spark_broker, group):
            assert time.monotonic() < deadline, f"orphans left: {_pending(spark_broker, group)}"
            time.sleep(0.3)
    finally:
        stop.set()
        resolver.join()
    assert _sent(spark_broker, target) == expected


def _run_available_now(spark: Any, broker: BrokerProcess, source: str, options: dict[str, str]) -> None:
    stream = (
        spark.readStream.format("txmq").option("endpoints", broker.namesrv).option("topic", source)
        .option("startingOffsets", "earliest").load().selectExpr("body", "keys")
    )  # fmt: skip
    query = stream.writeStream.format("txmq").options(**options).trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert query.exception() is None


def _resolve_until(options: dict[str, str], stop: threading.Event) -> None:
    async def run() -> None:
        done = asyncio.Event()
        task = asyncio.get_running_loop().create_task(
            run_resolver(parse_sink_options(options, streaming=True), done)
        )
        while not stop.is_set():
            await asyncio.sleep(0.1)
        done.set()
        await task

    asyncio.run(run())
