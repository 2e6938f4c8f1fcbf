"""Fuzz the broker's admin JSON dispatcher: random operations and arguments give a result or a
TxmqError, never another exception (every front door maps only TxmqError to a status)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.broker import admin
from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common.clock import FakeClock
from txmq.common.errors import TxmqError
from txmq.storage.fs import FaultyFileSystem

KEYS = [
    "name",
    "queues",
    "type",
    "perm",
    "group",
    "topic",
    "policy",
    "timestamp_ms",
    "key",
    "id",
    "message_id",
    "transaction_id",
    "limit",
    "commit",
    "offset",
    "max_count",
    "queue_id",
]
VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(
        [
            "orders",
            "%RETRY%g",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "beginning",
            "end",
            "timestamp",
            "g",
            "",
            "FIFO",
            "7",
        ]
    )
    | st.lists(st.integers(), max_size=3)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
ARGS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([*admin.operations(), "nope", ""]), ARGS | st.just([])), max_size=6)
)
async def test_dispatch_returns_or_raises_txmq_error(calls: list[tuple[str, object]]) -> None:
    broker = await Broker.open(
        BrokerConfig(data_dir="/b"), clock=FakeClock(), fs=FaultyFileSystem(), inline_flush=True
    )
    try:
        for op, args in calls:
            try:
                await admin.dispatch(broker, op, args)  # type: ignore[arg-type]
            except TxmqError:
                pass
    finally:
        await broker.close()
