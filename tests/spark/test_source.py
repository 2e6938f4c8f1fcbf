"""The ``txmq`` source on a real SparkSession against a real ``txmq broker``."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.client.broker import BrokerProcess
from tests.spark.conftest import new_topic
from tests.spark.helpers import bodies_in_parquet, produce, run_available_now, stream
from txmq.client import BlockingProducer, BlockingTransactionProducer, LocalTransactionState, Message


def _batch(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    reader = spark.read.format("txmq").option("endpoints", broker.namesrv).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_returns_every_message_once_with_its_fields(
    spark: Any, spark_broker: BrokerProcess
) -> None:
    topic = new_topic(spark_broker, queues=4)
    before_ms = int(time.time() * 1000) - 1
    with BlockingProducer(spark_broker.namesrv, group="spark-batch") as producer:
        for i in range(20):
            producer.send(
                Message(
                    topic, f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd", keys=(f"k{i}", "x"),
                    properties={"n": str(i)},
                )
            )  # fmt: skip
        producer.send(Message(topic, b"fifo", message_group="g1"))
    rows = _batch(spark, spark_broker, topic).collect()
    assert len(rows) == 21
    assert len({(r.queue_id, r.queue_offset) for r in rows}) == 21
    assert {r.queue_id for r in rows} == {0, 1, 2, 3}
    by_body = {bytes(r.body).decode(): r for r in rows}
    assert set(by_body) == {f"m{i}" for i in range(20)} | {"fifo"}
    m3 = by_body["m3"]
    assert (m3.topic, m3.tags, m3.keys, m3.properties) == (topic, "odd", "k3 x", {"n": "3"})
    assert m3.message_id and m3.transaction_id is None and m3.delivery_timestamp is None
    assert m3.born_timestamp >= dt.datetime.fromtimestamp(before_ms / 1000) - dt.timedelta(hours=24)
    assert m3.store_timestamp is not None and m3.born_timestamp is not None
    assert by_body["fifo"].message_group == "g1"
    # the tag filter runs in the broker: only matching messages come back
    even = _batch(spark, spark_broker, topic, tags="even").collect()
    assert sorted(bytes(r.body).decode() for r in even) == sorted(f"m{i}" for i in range(0, 20, 2))
    both = _batch(spark, spark_broker, topic, tags="even||odd").count()
    assert both == 20
    # explicit offsets: queue 0 from its second message to its end, the other queues not at all
    q0 = sorted(r.queue_offset for r in rows if r.queue_id == 0)
    ranged = _batch(
        spark, spark_broker, topic,
        startingOffsets=json.dumps({topic: {"0": q0[1], "1": -1, "2": -1, "3": -1}}),
        endingOffsets="latest",
    ).collect()  # fmt: skip
    assert sorted(r.queue_offset for r in ranged) == q0[1:] and {r.queue_id for r in ranged} == {0}
    # a time range after every message is empty; one that covers them returns them all
    future = str(int(time.time() * 1000) + 3_600_000)
    assert _batch(spark, spark_broker, topic, startingTimestamp=future).count() == 0
    assert _batch(spark, spark_broker, topic, startingTimestamp=str(before_ms)).count() == 21


def test_tuples_and_arrow_batches_give_the_same_rows(spark: Any, spark_broker: BrokerProcess) -> None:
    topic = new_topic(spark_broker, queues=2)
    produce(spark_broker, topic, [f"r{i}" for i in range(8)], tags="t", keys=("a",), properties={"p": "v"})
    cols = ["topic", "queue_id", "queue_offset", "message_id", "tags", "keys", "body", "born_timestamp"]
    arrow = sorted(tuple(r) for r in _batch(spark, spark_broker, topic).select(*cols).collect())
    rows = sorted(tuple(r) for r in _batch(spark, spark_broker, topic, arrow="false").select(*cols).collect())
    assert arrow == rows and len(rows) == 8


class _Decide:
    """Commit bodies starting with ``c``, roll back ``r``, leave ``p`` pending (check-backs say unknown)."""

    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        return {
            b"c": LocalTransactionState.COMMIT_MESSAGE,
            b"r": LocalTransactionState.ROLLBACK_MESSAGE,
        }.get(msg.body[:1], LocalTransactionState.UNKNOW)

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


def test_only_committed_transactional_messages_are_visible(spark: Any, spark_broker: BrokerProcess) -> None:
    topic = new_topic(spark_broker, queues=2)
    with BlockingTransactionProducer("spark-tx", _Decide(), spark_broker.namesrv) as producer:
        txids = {}
        for body in ["c1", "r1", "p1", "c2", "r2", "p2", "c3"]:
            message = Message(topic, body.encode(), transactional=True)
            result, _ = producer.send_message_in_transaction(message)
            txids[body] = result.transaction_id
        produce(spark_broker, topic, ["plain"])
        rows = _batch(spark, spark_broker, topic).collect()
        assert sorted(bytes(r.body).decode() for r in rows) == ["c1", "c2", "c3", "plain"]
        shown = {bytes(r.body).decode(): r.transaction_id for r in rows}
        assert shown == {"c1": txids["c1"], "c2": txids["c2"], "c3": txids["c3"], "plain": None}


def test_stream_to_parquet_survives_stops_and_restarts_exactly_once(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    topic = new_topic(spark_broker, queues=3)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produce(spark_broker, topic, [f"a{i}" for i in range(15)])
    run_available_now(stream(spark, spark_broker, topic, startingOffsets="earliest"), out, checkpoint)
    assert bodies_in_parquet(spark, out) == Counter(f"a{i}" for i in range(15))

    # more data; a continuous query in small batches is stopped abruptly after its first batch
    produce(spark_broker, topic, [f"b{i}" for i in range(30)])
    query = (
        stream(spark, spark_broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="4")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    deadline = time.monotonic() + 120
    while not [p for p in query.recentProgress if p["numInputRows"] > 0] and time.monotonic() < deadline:
        query.awaitTermination(0.2)
    query.stop()
    assert len(bodies_in_parquet(spark, out)) < 45, "the stop came after everything was read"

    # more data, then a query dies because the broker stops answering (its reads time out)
    produce(spark_broker, topic, [f"c{i}" for i in range(6)])
    spark_broker.pause()
    try:
        query = (
            stream(spark, spark_broker, topic, requestTimeoutMs="1500")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        with pytest.raises(StreamingQueryException, match=r"(?i)timed? ?out|txmq"):
            query.awaitTermination(120)
    finally:
        spark_broker.resume()

    # restart from the checkpoint: everything arrives, nothing twice
    run_available_now(stream(spark, spark_broker, topic, startingOffsets="earliest"), out, checkpoint)
    expected = Counter([f"a{i}" for i in range(15)] + [f"b{i}" for i in range(30)])
    expected.update(f"c{i}" for i in range(6))
    assert bodies_in_parquet(spark, out) == expected


def test_max_offsets_per_trigger_bounds_every_batch(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = new_topic(spark_broker, queues=2)
    produce(spark_broker, topic, [f"m{i}" for i in range(10)])
    df = stream(spark, spark_broker, topic, startingOffsets="earliest", maxOffsetsPerTrigger="4")
    query = run_available_now(df, tmp_path / "out", tmp_path / "checkpoint")
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [4, 4, 2]
    for progress in query.recentProgress:
        end = progress["sources"][0]["endOffset"]
        assert end is None or list(json.loads(end)[topic]) == ["0", "1"]


def test_min_partitions_splits_a_queue_into_parallel_tasks_exactly_once(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    """One queue read by several tasks: each gets a contiguous piece of its offsets, none twice."""
    topic = new_topic(spark_broker, queues=1)
    produce(spark_broker, topic, [f"m{i}" for i in range(30)])
    df = _batch(spark, spark_broker, topic, minPartitions="4")
    assert df.rdd.getNumPartitions() == 4
    rows = df.select("body", "queue_offset").collect()
    assert sorted(r.queue_offset for r in rows) == list(range(30))
    assert Counter(bytes(r.body).decode() for r in rows) == Counter(f"m{i}" for i in range(30))
    assert _batch(spark, spark_broker, topic, maxOffsetsPerPartition="7").rdd.getNumPartitions() == 5

    df = stream(
        spark, spark_broker, topic, startingOffsets="earliest", minPartitions="3", maxOffsetsPerTrigger="20"
    )
    query = run_available_now(df, tmp_path / "out", tmp_path / "checkpoint")
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [20, 10]
    assert bodies_in_parquet(spark, tmp_path / "out") == Counter(f"m{i}" for i in range(30))
