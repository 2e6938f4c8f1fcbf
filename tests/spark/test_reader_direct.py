"""The stream reader's driver-side calls made directly, as Spark's source worker makes them (no JVM).

These pin what a Spark run can hit only by chance: Spark calls ``initialOffset`` twice on a first
start, and messages produced between the calls must not be skipped; lost offsets fail or warn.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from tests.client.broker import BrokerProcess
from tests.spark.conftest import new_topic
from tests.spark.helpers import produce
from txmq.spark import offsets as off
from txmq.spark.fetch import DataLoss


@pytest.fixture(scope="module")
def source() -> Any:
    from txmq.spark import SparkUnavailable, require_spark

    try:
        require_spark(need_java=False)
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    from txmq.spark import source

    return source


def _reader(source: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    ds = source.TxmqDataSource({"endpoints": broker.namesrv, "topic": topic, "arrow": "false", **options})
    return ds.streamReader(source.spark_schema())


def _read_all(reader: Any, start: Any, end: Any) -> list[Any]:
    return [row for part in reader.partitions(start, end) for row in reader.read(part)]


def test_latest_is_resolved_once_so_data_between_the_two_initial_calls_is_read(
    source: Any, spark_broker: BrokerProcess
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = new_topic(spark_broker, queues=2)
    produce(spark_broker, topic, ["old1", "old2"])
    reader = _reader(source, spark_broker, topic, startingOffsets="latest")
    first = reader.initialOffset()
    produce(spark_broker, topic, ["new1", "new2", "new3"])
    assert reader.initialOffset() == first
    end = reader.latestOffset(first, ReadAllAvailable())
    rows = _read_all(reader, reader.initialOffset(), end)
    assert sorted(r[6] for r in rows) == [b"new1", b"new2", b"new3"]
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # nothing new: the very same offsets
    assert reader.partitions(end, end) == []


def test_available_now_never_reads_past_what_existed_when_it_started(
    source: Any, spark_broker: BrokerProcess
) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows

    topic = new_topic(spark_broker, queues=2)
    produce(spark_broker, topic, [f"m{i}" for i in range(6)])
    reader = _reader(source, spark_broker, topic, startingOffsets="earliest")
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    produce(spark_broker, topic, ["late"])
    seen = 0
    while (end := reader.latestOffset(start, ReadMaxRows(4))) != start:
        seen += len(_read_all(reader, start, end))
        start = end
    assert seen == 6


def test_lost_offsets_fail_the_query_or_are_skipped_with_a_warning(
    source: Any, spark_broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(spark_broker, queues=1)
    produce(spark_broker, topic, ["m0", "m1"])
    strict = _reader(source, spark_broker, topic)
    went_back = ({topic: {"0": 5}}, {topic: {"0": 2}})
    with pytest.raises(DataLoss, match="went back"):
        strict.partitions(*went_back)
    # a planned range beyond what the queue holds (it was re-created or truncated)
    beyond = source.RangePartition(off.QueueRange(topic, 0, 0, 9))
    with pytest.raises(DataLoss, match="below the planned 9"):
        list(strict.read(beyond))
    lenient = _reader(source, spark_broker, topic, failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="txmq.spark"):
        assert lenient.partitions(*went_back) == []
        assert [r[6] for r in lenient.read(beyond)] == [b"m0", b"m1"]
    assert "skipped lost messages" in caplog.text


def test_the_grpc_transport_reads_the_same_rows_as_remoting(source: Any, spark_broker: BrokerProcess) -> None:
    topic = new_topic(spark_broker, queues=2)
    produce(spark_broker, topic, [f"g{i}" for i in range(5)], tags="t", keys=("k",))

    def rows(endpoints: str, transport: str) -> list[Any]:
        ds = source.TxmqDataSource(
            {"endpoints": endpoints, "transport": transport, "topic": topic, "arrow": "false"}
        )
        reader = ds.reader(source.spark_schema())
        return sorted(row[:7] for part in reader.partitions() for row in reader.read(part))

    over_grpc = rows(spark_broker.grpc, "grpc")
    assert over_grpc == rows(spark_broker.namesrv, "remoting")
    assert [r[6] for r in sorted(over_grpc, key=lambda r: r[6])] == [f"g{i}".encode() for i in range(5)]


def test_pull_range_keeps_one_pull_ahead_and_drops_it_when_the_caller_stops(
    spark_broker: BrokerProcess,
) -> None:
    from txmq.spark import options as opt
    from txmq.spark.fetch import Session

    topic = new_topic(spark_broker, queues=1)
    produce(spark_broker, topic, [f"m{i}" for i in range(10)], tags="a")
    opts = opt.parse(
        {"endpoints": spark_broker.namesrv, "topic": topic, "pullBatchSize": "3"}, streaming=False
    )
    with Session(opts) as session:
        rng = off.QueueRange(topic, 0, 1, 8)
        batches = list(session.pull_range(rng))
        assert [len(b) for b in batches] == [3, 3, 1]
        assert [m.body for b in batches for m in b] == [b"m%d" % i for i in range(1, 8)]
        reader = session.pull_range(off.QueueRange(topic, 0, 0, 10))
        assert [m.body for m in next(reader)] == [b"m0", b"m1", b"m2"]
        reader.close()  # the pull for offsets 3.. was on its way: cancelled, not left behind
        assert [m.body for b in session.pull_range(off.QueueRange(topic, 0, 9, 10)) for m in b] == [b"m9"]
    filtered = opt.parse(
        {"endpoints": spark_broker.namesrv, "topic": topic, "pullBatchSize": "4", "tags": "b"},
        streaming=False,
    )
    with Session(filtered) as session:
        assert list(session.pull_range(off.QueueRange(topic, 0, 0, 10))) == []
        assert list(session.pull_columns(off.QueueRange(topic, 0, 0, 10))) == []


def test_pull_columns_reads_the_range_and_drops_the_pull_ahead_when_the_caller_stops(
    spark_broker: BrokerProcess,
) -> None:
    from txmq.spark import options as opt
    from txmq.spark.fetch import Session

    topic = new_topic(spark_broker, queues=1)
    produce(spark_broker, topic, [f"m{i}" for i in range(10)], tags="a")
    opts = opt.parse(
        {"endpoints": spark_broker.namesrv, "topic": topic, "pullBatchSize": "3"}, streaming=False
    )
    with Session(opts) as session:
        batches = list(session.pull_columns(off.QueueRange(topic, 0, 1, 8)))
        assert [list(b[6]) for b in batches] == [[b"m1", b"m2", b"m3"], [b"m4", b"m5", b"m6"], [b"m7"]]
        assert [list(b[2]) for b in batches] == [[1, 2, 3], [4, 5, 6], [7]]
        reader = session.pull_columns(off.QueueRange(topic, 0, 0, 10))
        assert list(next(reader)[6]) == [b"m0", b"m1", b"m2"]
        reader.close()  # the pull for offsets 3.. was on its way: cancelled, not left behind
        assert [list(b[6]) for b in session.pull_columns(off.QueueRange(topic, 0, 9, 10))] == [[b"m9"]]


def test_pull_arrow_joins_consecutive_pulls_into_one_batch_with_the_same_rows(
    source: Any, spark_broker: BrokerProcess
) -> None:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from txmq.spark import options as opt
    from txmq.spark import rows
    from txmq.spark.fetch import Session

    topic = new_topic(spark_broker, queues=1)
    produce(spark_broker, topic, [f"m{i}" for i in range(10)], tags="a")
    produce(spark_broker, topic, ["n0", "n1"], tags="b")
    schema = to_arrow_schema(source.spark_schema(), timezone="UTC")
    for tags, expected in ((None, [f"m{i}" for i in range(1, 10)] + ["n0"]), ("b", ["n0"])):
        options = {"endpoints": spark_broker.namesrv, "topic": topic, "pullBatchSize": "3"}
        opts = opt.parse(options if tags is None else {**options, "tags": tags}, streaming=False)
        with Session(opts) as session:
            rng = off.QueueRange(topic, 0, 1, 11)
            batches = list(session.pull_arrow(rng, schema))
            columns = list(session.pull_columns(rng))
        # four pulls of at most 3 messages, one Arrow batch: the rows of the column path, in order
        assert [b.num_rows for b in batches] == [len(expected)]
        assert batches[0].column("body").to_pylist() == [m.encode() for m in expected]
        parts = [rows.arrow_of(c, schema) for c in columns]
        assert pa.Table.from_batches(batches).equals(pa.Table.from_batches(parts, schema).combine_chunks())


def test_joined_pull_bodies_keep_their_order_and_size() -> None:
    from txmq.client._transport import PullStatus, RawPullBatch
    from txmq.spark.fetch import _joined

    def raw(body: bytes) -> RawPullBatch:
        return RawPullBatch(PullStatus.FOUND if body else PullStatus.NO_MATCHED_MESSAGE, body, 0, 0, 0)

    bodies = [b"ab", b"", b"cde", b"f", b"", b"ghij", b"k"]
    assert list(_joined(iter(map(raw, bodies)), 4)) == [b"abcde", b"fghij", b"k"]
    assert list(_joined(iter(map(raw, bodies)), 1)) == [b"ab", b"cde", b"f", b"ghij", b"k"]
    assert list(_joined(iter(map(raw, bodies)), 100)) == [b"abcdefghijk"]
    assert list(_joined(iter([raw(b"")]), 4)) == []


def test_a_batch_start_after_its_end_is_an_error_naming_the_queue(
    source: Any, spark_broker: BrokerProcess
) -> None:
    import json

    from txmq.common.errors import InvalidOffset

    topic = new_topic(spark_broker, queues=1)
    produce(spark_broker, topic, [f"m{i}" for i in range(4)])
    ds = source.TxmqDataSource({
        "endpoints": spark_broker.namesrv, "topic": topic, "arrow": "false",
        "startingOffsets": json.dumps({topic: {"0": 3}}), "endingOffsets": json.dumps({topic: {"0": 1}}),
    })  # fmt: skip
    with pytest.raises(InvalidOffset, match=rf"{topic}/0: start 3 > end 1"):
        ds.reader(source.spark_schema()).partitions()
    # a start equal to its end reads nothing, without an error
    ds = source.TxmqDataSource({
        "endpoints": spark_broker.namesrv, "topic": topic, "arrow": "false",
        "startingOffsets": json.dumps({topic: {"0": 2}}), "endingOffsets": json.dumps({topic: {"0": 2}}),
    })  # fmt: skip
    reader = ds.reader(source.spark_schema())
    assert [row for part in reader.partitions() for row in reader.read(part)] == []


@pytest.mark.parametrize("transport", ["remoting", "grpc"])
def test_a_topic_that_does_not_exist_is_an_error_naming_it_and_the_endpoint(
    source: Any, spark_broker: BrokerProcess, transport: str
) -> None:
    """A read of a missing topic answered 0 rows: the route lookup auto-created an empty topic. A
    RocketMQ consumer's route lookup of a missing topic fails (the name server's TOPIC_NOT_EXIST;
    Apache creates topics only for a 4.x send), so the batch and stream readers now refuse it,
    naming the topic and the endpoint, and leave no topic behind."""
    from txmq.cli.admin_client import call as admin_call
    from txmq.common import errors

    topic = f"never-{uuid.uuid4().hex[:8]}"
    endpoint = spark_broker.namesrv if transport == "remoting" else spark_broker.grpc
    options = {"endpoints": endpoint, "topic": topic, "arrow": "false", "transport": transport}
    batch = source.TxmqDataSource(options).reader(source.spark_schema())
    stream = source.TxmqDataSource(options).streamReader(source.spark_schema())
    for plan in (batch.partitions, stream.initialOffset):
        with pytest.raises(errors.TopicNotFound, match=f"topic {topic} does not exist at {endpoint}"):
            plan()
    with pytest.raises(errors.TopicNotFound):
        admin_call(spark_broker.grpc, "topic.describe", {"name": topic})  # the planning created nothing
