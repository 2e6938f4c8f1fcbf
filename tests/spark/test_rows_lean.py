"""The source's lean rows (``columns_of_pulled``: columns straight from ``decode_pulled``'s tuples)
against the general ones (``to_tuple`` / ``to_arrow`` over ``pulled_views``): equal rows and Arrow
batches for arbitrary records (keys, tags, properties, delivery times, retry topics, reconsume times,
transaction ids), tag filters and range ends, and the same error for a damaged body. Pure: no JVM."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_pull_decoder import _TAGS, I64, wire_st
from txmq.client import _remoting_convert as conv
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


def _general(body: bytes, tags: frozenset[str] | None, end: int) -> list[tuple[Any, ...]] | str:
    try:
        return [rows.to_tuple(v) for v in conv.pulled_views(body, tags) if v.queue_offset < end]
    except (TxmqError, ValueError, OverflowError) as exc:  # a timestamp past year 9999 fails alike
        return f"{type(exc).__name__}: {exc}"


def _lean(body: bytes, tags: frozenset[str] | None, end: int) -> list[tuple[Any, ...]] | str:
    try:
        return rows.tuples_of(rows.columns_of_pulled(body, tags, end))
    except (TxmqError, ValueError, OverflowError) as exc:  # a timestamp past year 9999 fails alike
        return f"{type(exc).__name__}: {exc}"


# epoch milliseconds a datetime can hold, so that to_tuple itself does not fail
_MS = st.integers(0, 253_402_300_799_999)
_DELIVER = st.one_of(_MS.map(str), st.just(""), st.just("soon"))


def _with_times(w: WireMessage, born: int, store: int, deliver: str | None) -> WireMessage:
    extra = {props.TIMER_DELIVER_MS: deliver} if deliver is not None else {}
    return WireMessage(
        w.topic, w.body, {**w.properties, **extra},
        queue_id=w.queue_id, queue_offset=w.queue_offset, commit_log_offset=w.commit_log_offset,
        born_timestamp=born, born_host=w.born_host, store_timestamp=store, store_host=w.store_host,
        reconsume_times=w.reconsume_times,
    )  # fmt: skip


row_wire_st = st.builds(_with_times, wire_st, _MS, _MS, st.one_of(st.none(), _DELIVER))
_END = st.one_of(st.just(2**63), I64)


@settings(max_examples=300, deadline=None)
@given(st.lists(row_wire_st, max_size=4), _TAGS, _END)
def test_lean_rows_equal_the_view_rows(
    messages: list[WireMessage], tags: frozenset[str] | None, end: int
) -> None:
    body = encode_messages(messages)
    lean = _lean(body, tags, end)
    assert lean == _general(body, tags, end)


@settings(max_examples=100, deadline=None)
@given(st.lists(row_wire_st, min_size=1, max_size=4), _TAGS)
def test_lean_arrow_batches_equal_the_view_batches(
    arrow_schema: Any, messages: list[WireMessage], tags: frozenset[str] | None
) -> None:
    body = encode_messages(messages)
    views = conv.pulled_views(body, tags)
    lean = rows.arrow_of(rows.columns_of_pulled(body, tags, 2**63), arrow_schema)
    assert lean.equals(rows.to_arrow(views, arrow_schema))
    assert lean.schema.equals(arrow_schema)


@settings(max_examples=200, deadline=None)
@given(st.lists(row_wire_st, min_size=1, max_size=3), st.data())
def test_damaged_bodies_fail_alike(messages: list[WireMessage], data: st.DataObject) -> None:
    body = bytearray(encode_messages(messages))
    if data.draw(st.booleans()):
        del body[data.draw(st.integers(0, len(body) - 1)) :]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    assert _lean(bytes(body), None, 2**63) == _general(bytes(body), None, 2**63)


def test_bad_properties_and_ipv6_records_take_the_general_path() -> None:
    good = encode_messages([WireMessage("T", b"x", {props.TAGS: "a", "u": "1"}, queue_offset=3)])
    assert _lean(good, None, 10) == _general(good, None, 10) != []
    assert _lean(good, frozenset({"b"}), 10) == []
    ipv6 = bytearray(good)
    ipv6[31] |= 0x10
    assert _lean(bytes(ipv6), None, 10) == _general(bytes(ipv6), None, 10)
    no_value = b"TAGS\x01a\x02u\x02"  # "u" has no value
    bad = encode_messages([WireMessage("T", b"x", {}, properties_raw=no_value)])
    assert _lean(bad, None, 10) == _general(bad, None, 10)
    assert isinstance(_lean(bad, None, 10), str)
