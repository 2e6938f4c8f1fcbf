"""Producing test data on the shared broker and reading streaming output back through Spark."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.client.broker import BrokerProcess
from txmq.client import BlockingProducer, Message


def produce(broker: BrokerProcess, topic: str, bodies: list[str], **fields: Any) -> None:
    with BlockingProducer(broker.namesrv, group="spark-test-producer") as producer:
        for body in bodies:
            producer.send(Message(topic, body.encode(), **fields))


def stream(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("txmq").option("endpoints", broker.namesrv).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df: Any, out: Path, checkpoint: Path, timeout_s: float = 120) -> Any:
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(timeout_s), "the AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query


def bodies_in_parquet(spark: Any, out: Path) -> Counter[str]:
    """Bodies in the sink as Spark sees them (through ``_spark_metadata``: committed files only)."""
    if not out.exists():
        return Counter()
    return Counter(bytes(r.body).decode() for r in spark.read.parquet(str(out)).select("body").collect())
