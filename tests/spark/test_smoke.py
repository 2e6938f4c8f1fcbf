"""The ``txmq`` data source is registered on the shared session and reads a topic end to end."""

from __future__ import annotations

from typing import Any

from tests.client.broker import BrokerProcess
from tests.spark.conftest import new_topic
from txmq.client import BlockingProducer, Message
from txmq.spark import schema as sch


def test_registered_source_reads_what_was_sent(spark: Any, spark_broker: BrokerProcess) -> None:
    topic = new_topic(spark_broker, queues=2)
    with BlockingProducer(spark_broker.namesrv, group="smoke") as producer:
        for i in range(6):
            producer.send(Message(topic, f"m{i}".encode()))
    df = spark.read.format("txmq").option("endpoints", spark_broker.namesrv).option("topic", topic).load()
    assert tuple(df.columns) == sch.NAMES
    assert sorted(bytes(r.body) for r in df.collect()) == [f"m{i}".encode() for i in range(6)]
