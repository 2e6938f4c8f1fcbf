"""Pure parts of the SDK: selectors, batches, allocation, back-off, window, conversions, public API."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import txmq
import txmq.client
from txmq.client import Backoff, Message, MessageQueue, allocate_averagely, select_by_hash, split_batches
from txmq.client._remoting_convert import matches, message_properties, parse_tags, view_of
from txmq.client._window import InFlightWindow
from txmq.common import errors
from txmq.protocol.remoting.message_codec import WireMessage


def test_public_api_is_pinned() -> None:
    assert sorted(txmq.client.__all__) == sorted(
        [
            "Backoff",
            "BlockingProducer",
            "BlockingPullConsumer",
            "BlockingPushConsumer",
            "BlockingSimpleConsumer",
            "BlockingTransactionProducer",
            "ClientClosed",
            "ClientStatus",
            "ConnectionError_",
            "ConsumeFrom",
            "ConsumeResult",
            "Deduplicator",
            "Feature",
            "LocalTransactionState",
            "Message",
            "MessageListener",
            "MessageQueue",
            "MessageQueueSelector",
            "MessageView",
            "Producer",
            "PullConsumer",
            "PushConsumer",
            "SendResult",
            "SendTimeout",
            "SimpleConsumer",
            "Transaction",
            "TransactionListener",
            "TransactionProducer",
            "Transport",
            "TxmqError",
            "Unsupported",
            "allocate_averagely",
            "select_by_hash",
            "split_batches",
        ]
    )
    assert txmq.Producer is txmq.client.Producer


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=12, unique=True), st.integers(0, 40))
def test_allocation_partitions_the_queues(members: list[str], n: int) -> None:
    queues = list(range(n))
    shares = [allocate_averagely(m, members, queues) for m in members]
    assert sorted(q for share in shares for q in share) == queues
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1
    assert allocate_averagely("stranger", members, queues) == [] or "stranger" in members


def test_select_by_hash_is_stable_and_spreads() -> None:
    queues = [MessageQueue("t", i) for i in range(8)]
    msg = Message("t", b"x")
    assert select_by_hash(queues, msg, "order-1") == select_by_hash(queues, msg, "order-1")
    assert len({select_by_hash(queues, msg, k).queue_id for k in range(100)}) == 8


def test_split_batches_respects_the_limit() -> None:
    msgs = [Message("t", b"x" * random.Random(i).randint(1, 5000)) for i in range(200)]
    batches = list(split_batches(msgs, max_bytes=20_000))
    assert [m for b in batches for m in b] == msgs
    assert all(sum(len(m.body) + 256 for m in b) <= 20_000 for b in batches)
    with pytest.raises(errors.MessageTooLarge):
        list(split_batches([Message("t", b"x" * 30_000)], max_bytes=20_000))


def test_backoff_grows_caps_and_jitters() -> None:
    backoff = Backoff(initial_s=0.1, max_s=1.0, jitter=0.0)
    assert [backoff.delay_s(a) for a in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    jittered = Backoff(initial_s=1.0, max_s=1.0, jitter=0.2)
    delays = {jittered.delay_s(0, random.Random(s)) for s in range(20)}
    assert len(delays) > 1
    assert all(0.8 <= d <= 1.2 for d in delays)


async def test_window_bounds_count_and_bytes() -> None:
    window = InFlightWindow(max_messages=2, max_bytes=100)
    await window.acquire(60, 1)
    with pytest.raises(errors.SendTimeout):
        await window.acquire(60, 0.05)  # bytes
    await window.acquire(10, 1)
    with pytest.raises(errors.SendTimeout):
        await window.acquire(1, 0.05)  # count
    waiter = asyncio.ensure_future(window.acquire(30, 5))
    await asyncio.sleep(0)
    window.release(60)
    await waiter
    assert (window.messages, window.bytes) == (2, 40)


def test_properties_round_trip_through_a_record() -> None:
    msg = Message("t", b"body", tags="tag", keys=("a", "b"), properties={"user": "v"}, message_group="g")
    wire = WireMessage(
        topic="t", body=b"body", properties=message_properties(msg, "ID1", "pg"), queue_offset=7
    )
    view = view_of(wire)
    assert (view.tags, view.keys, view.message_group, view.message_id) == ("tag", ("a", "b"), "g", "ID1")
    assert view.properties["user"] == "v"
    assert view.properties["PGROUP"] == "pg"
    timed = message_properties(Message("t", b"x", delivery_timestamp_ms=5), "ID", "")
    assert timed["TIMER_DELIVER_MS"] == "5"


def test_numeric_properties_that_int_refuses_are_ignored() -> None:
    # '\u00b2' (superscript two) is a digit for str.isdigit() but int() refuses it: a broker or a peer
    # may hand any text, the decoder must not raise
    wire = WireMessage(
        topic="t", body=b"x", reconsume_times=3,
        properties={"RECONSUME_TIME": "\u00b2", "TIMER_DELIVER_MS": "\u00b2"},
    )  # fmt: skip
    view = view_of(wire)
    assert (view.reconsume_times, view.delivery_timestamp_ms) == (3, None)


def test_tag_expressions() -> None:
    view = view_of(WireMessage(topic="t", body=b"x", properties={"TAGS": "b"}))
    assert matches(parse_tags("a || b"), view)
    assert not matches(parse_tags("a"), view)
    assert matches(parse_tags("*"), view)
    with pytest.raises(errors.InvalidFilter):
        parse_tags("||")
