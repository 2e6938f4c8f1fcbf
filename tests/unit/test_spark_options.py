"""The source's options parsed without a JVM: defaults, bounds, validation errors that name the option."""

from __future__ import annotations

import pytest

from txmq.common import errors
from txmq.spark import options as opt

BASE = {"endpoints": "127.0.0.1:9876", "topic": "orders"}


def test_defaults_differ_between_streaming_and_batch() -> None:
    stream = opt.parse(BASE, streaming=True)
    batch = opt.parse(BASE, streaming=False)
    assert stream.starting == opt.LATEST and batch.starting == opt.EARLIEST
    assert batch.ending == opt.LATEST
    assert stream.tags == "*" and stream.fail_on_data_loss and stream.max_offsets_per_trigger is None
    assert stream.transport == "remoting" and stream.arrow


def test_keys_are_case_insensitive_and_topics_a_sorted_comma_list() -> None:
    parsed = opt.parse(
        {"ENDPOINTS": "h:1", "Topic": "b, a,b", "maxOffsetsPerTrigger": "7", "FAILONDATALOSS": "False"},
        streaming=True,
    )
    assert parsed.topics == ("a", "b")
    assert parsed.max_offsets_per_trigger == 7
    assert parsed.fail_on_data_loss is False


def test_starting_offsets_forms() -> None:
    def start(value: str) -> opt.Bound:
        return opt.parse({**BASE, "startingOffsets": value}, streaming=True).starting

    assert start("earliest") == opt.EARLIEST
    assert start("LATEST") == opt.LATEST
    assert start("1700000000000") == opt.Bound("timestamp", timestamp_ms=1700000000000)
    assert start('{"orders": {"1": 5, "0": -2}}') == opt.Bound(
        "offsets", offsets={("orders", 0): -2, ("orders", 1): 5}
    )
    by_time = opt.parse({**BASE, "startingTimestamp": "12"}, streaming=True).starting
    assert by_time == opt.Bound("timestamp", timestamp_ms=12)


def test_batch_time_range() -> None:
    parsed = opt.parse({**BASE, "startingTimestamp": "10", "endingTimestamp": "20"}, streaming=False)
    assert parsed.starting.timestamp_ms == 10 and parsed.ending == opt.Bound("timestamp", timestamp_ms=20)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"endpoints": ""}, "endpoints is required"),
        ({"topic": " , "}, "topic is required"),
        ({"startingOffsets": "soon"}, "startingOffsets"),
        ({"startingOffsets": '{"other": {"0": 1}}'}, "not read"),
        ({"startingOffsets": '{"orders": {"zero": 1}}'}, "startingOffsets"),
        ({"startingOffsets": "earliest", "startingTimestamp": "5"}, "not both"),
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({"transport": "http"}, "transport"),
        ({"pullBatchSize": "100000"}, "at most"),
        ({"tags": "||"}, "tags"),
        ({"minPartitions": "0"}, "minPartitions"),
        ({"minPartitions": "10001"}, "at most"),
        ({"maxOffsetsPerPartition": "-5"}, "maxOffsetsPerPartition"),
    ],
)
def test_bad_options_raise_errors_naming_the_option(extra: dict[str, str], match: str) -> None:
    with pytest.raises(errors.InvalidArgument, match=f"(?i){match}"):
        opt.parse({**BASE, **extra}, streaming=True)


def test_ending_bounds_are_batch_only_and_never_earliest() -> None:
    with pytest.raises(errors.InvalidArgument, match="batch reads only"):
        opt.parse({**BASE, "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(errors.InvalidArgument, match="cannot be earliest"):
        opt.parse({**BASE, "endingOffsets": "earliest"}, streaming=False)


def test_topic_names_are_validated() -> None:
    with pytest.raises(errors.InvalidTopic):
        opt.parse({**BASE, "topic": "bad topic!"}, streaming=True)


def test_partition_options() -> None:
    parsed = opt.parse({**BASE, "MINPARTITIONS": "6", "maxOffsetsPerPartition": "5000"}, streaming=False)
    assert (parsed.min_partitions, parsed.max_offsets_per_partition) == (6, 5000)
    assert opt.parse(BASE, streaming=False).min_partitions is None
