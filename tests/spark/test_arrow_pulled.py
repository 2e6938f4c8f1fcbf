"""The source's column-by-column Arrow batches (``rows.arrow_of_pulled`` / ``arrow_pulled.batch_of_pulled``)
against the reference ``arrow_of(columns_of_pulled(...))`` (itself held to the ``MessageView`` rows by
``test_rows_lean.py``): equal batches for arbitrary records, tag filters and range ends, the same error
for a damaged body, and the column path really taken for ordinary bodies. Pure: no JVM."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_pull_decoder import _TAGS
from tests.spark.test_rows_lean import _END, row_wire_st
from txmq.common import properties as props
from txmq.common.errors import TxmqError
from txmq.protocol.remoting.message_codec import WireMessage, encode_messages
from txmq.spark import rows


@pytest.fixture(scope="module")
def arrow_schema() -> Any:
    from txmq.spark import SparkUnavailable, require_spark

    try:
        require_spark(need_java=False)
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    from pyspark.sql.pandas.types import to_arrow_schema

    from txmq.spark.source import spark_schema

    return to_arrow_schema(spark_schema(), timezone="UTC")


def _reference(body: bytes, tags: frozenset[str] | None, end: int, schema: Any) -> Any:
    try:
        columns = rows.columns_of_pulled(body, tags, end)
        return rows.arrow_of(columns, schema) if columns[0] else None
    except (TxmqError, ValueError, OverflowError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _columnar(body: bytes, tags: frozenset[str] | None, end: int, schema: Any) -> Any:
    try:
        return rows.arrow_of_pulled(body, tags, end, schema)
    except (TxmqError, ValueError, OverflowError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) or a is None:
        return a == b
    return not isinstance(b, str) and b is not None and a.equals(b) and a.schema.equals(b.schema)


def _one_topic(topic: str, messages: list[WireMessage]) -> list[WireMessage]:
    return [dataclasses.replace(m, topic=topic) for m in messages]


# one queue's pull: every record of one topic (the case the column path covers)
_TOPIC = st.one_of(st.text("abT%_", min_size=1, max_size=20), st.just("L" * 150), st.just("主题"))
one_topic_st = st.builds(_one_topic, _TOPIC, st.lists(row_wire_st, min_size=1, max_size=6))


@settings(max_examples=300, deadline=None)
@given(one_topic_st, _TAGS, _END)
def test_column_batches_equal_the_reference(
    arrow_schema: Any, messages: list[WireMessage], tags: frozenset[str] | None, end: int
) -> None:
    body = encode_messages(messages)
    assert _same(_columnar(body, tags, end, arrow_schema), _reference(body, tags, end, arrow_schema))


@settings(max_examples=100, deadline=None)
@given(st.lists(row_wire_st, min_size=1, max_size=4), _TAGS)
def test_mixed_topics_equal_the_reference(
    arrow_schema: Any, messages: list[WireMessage], tags: frozenset[str] | None
) -> None:
    body = encode_messages(messages)
    assert _same(_columnar(body, tags, 2**63, arrow_schema), _reference(body, tags, 2**63, arrow_schema))


def _plain(m: WireMessage) -> bool:
    """Records the column path takes itself (everything else goes the reference way)."""
    p = m.properties
    keys = p.get(props.KEYS, "")
    deliver = p.get(props.TIMER_DELIVER_MS, "")
    return (
        not p.get(props.RETRY_TOPIC)
        and " ".join(filter(None, keys.split(" "))) == keys
        and (deliver.isascii() or not deliver.isdigit())
    )


@settings(max_examples=200, deadline=None)
@given(one_topic_st, _TAGS)
def test_ordinary_bodies_take_the_column_path(
    arrow_schema: Any, messages: list[WireMessage], tags: frozenset[str] | None
) -> None:
    from txmq.spark.arrow_pulled import batch_of_pulled

    if not all(_plain(m) for m in messages):
        return
    body = encode_messages(messages)
    batch = batch_of_pulled(body, tags, 2**63, arrow_schema)  # no Unsupported
    assert _same(batch, _reference(body, tags, 2**63, arrow_schema))


@settings(max_examples=200, deadline=None)
@given(st.lists(row_wire_st, min_size=1, max_size=3), st.data())
def test_damaged_bodies_fail_alike(
    arrow_schema: Any, messages: list[WireMessage], data: st.DataObject
) -> None:
    body = bytearray(encode_messages(_one_topic("T", messages)))
    if data.draw(st.booleans()):
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    damaged = bytes(body)
    expected = _reference(damaged, None, 2**63, arrow_schema)
    assert _same(_columnar(damaged, None, 2**63, arrow_schema), expected)


@pytest.mark.parametrize(
    "raw",
    [
        b"TAGS\x01a\x02u\x02",  # an entry without a value
        b"u\x011\x02u\x012\x02TAGS\x01a\x02",  # a user property named twice: the last value wins
        b"TAGS\x01a\x02TAGS\x01b\x02",  # a system property named twice
        b"\x02\x02TAGS\x01a\x02\x02v\x01x\x01y\x02",  # empty entries, a value holding \x01
        b"KEYS\x01 k1  k2 \x02",  # keys to normalise
        b"RETRY_TOPIC\x01%RETRY%g\x02TAGS\x01a\x02",  # a retry topic replaces the topic
        b"TIMER_DELIVER_MS\x01\xc2\xb2\x02",  # a digit int() does not take
        b"TIMER_DELIVER_MS\x01soon\x02u\x01\x02",  # not a time; an empty user value
        b"\xff\x01x\x02",  # not UTF-8
        b"\x02\x02",  # only empty entries
        b"TAGS\x01a\x02u\x011",  # the last entry without its \x02
        b"a\x01\x02b\x01\xc3\xa9\x02",  # an empty value, a two-byte character
        b"",
    ],
)
def test_odd_properties_equal_the_reference(arrow_schema: Any, raw: bytes) -> None:
    messages = [
        WireMessage("T", b"body", {}, queue_offset=3, properties_raw=raw),
        WireMessage("T", b"", {props.TAGS: "a", "u": "1"}, queue_offset=4),
    ]
    body = encode_messages(messages)
    for tags in (None, frozenset({"a"}), frozenset({"b"})):
        for end in (2**63, 4, 3):
            assert _same(_columnar(body, tags, end, arrow_schema), _reference(body, tags, end, arrow_schema))
