"""A commit built from the cut its half's lane recorded is the commit built without it, byte for byte.

``SendService.half_lane_append`` knows where the routing pairs (``REAL_TOPIC``, ``REAL_QUEUE_ID``,
``TRAN_MSG``) start in the half's properties (``HalfAppend.cut``); ``TransactionService.half_stored``
keeps it with the half, and the commit's properties are then ``data[:cut]`` and the transaction id's
pair (``reput.committed_fields``), with no re-parse of the half's properties
(``reput.spliced_properties``). Two brokers on one FakeClock take the same generated halves (through
the lane, or the general path when the lane declines one: a delay, a delivery time, check immunity)
and commit them, one with the kept cut and one with it forgotten (-1: the fallback); their logs are
the same bytes. Halves whose cut is unknown (the general path; no producer group, whose pair then
follows the routing ones) keep -1, and a cut that does not point at the routing pairs is not trusted.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.records import keys_of
from txmq.broker.reput import committed_fields, spliced_properties
from txmq.broker.send import HalfAppend, SendContext
from txmq.common import names
from txmq.common import properties as props
from txmq.common.clock import FakeClock
from txmq.common.message import SysFlag
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.server.remoting.convert import to_message
from txmq.storage.api import FlushMode, StoredRecord, StoredTuple

_TEXT = st.text(alphabet=st.sampled_from("ab |-_é\u4e2d"), max_size=6)
_NAMES = st.sampled_from(["a", "b", "user.x", "é", "REAL", "REAL_TOPICS", "_TOPIC", props.TRANSACTION_ID])
_SYSTEM = {
    props.TAGS: st.sampled_from(["", "t", "tag-1"]),
    props.KEYS: st.sampled_from(["", "k1", "k1 k2"]),
    props.TRAN_MSG: st.sampled_from(["true", "false"]),
    props.PRODUCER_GROUP: st.sampled_from(["PG", "other"]),
    props.REAL_TOPIC: st.sampled_from(["Elsewhere"]),
    props.REAL_QUEUE_ID: st.sampled_from(["7"]),
}
_RARE = {
    props.DELAY: st.sampled_from(["2", "18"]),
    props.TIMER_DELIVER_MS: st.sampled_from(["1800000005000"]),
    props.CHECK_IMMUNITY_TIME_IN_SECONDS: st.sampled_from(["30"]),
}
_IDS = itertools.count(1)


@st.composite
def wire_properties(draw: st.DrawFn) -> dict[str, str]:
    """A half's properties as the remoting door decodes them, in wire order."""
    items = draw(st.lists(st.tuples(_NAMES, _TEXT), max_size=4))
    for key, values in _SYSTEM.items():
        if draw(st.booleans()):
            items.insert(draw(st.integers(0, len(items))), (key, draw(values)))
    # a message id (each its own), as every client sends: without one the general path makes one
    # per broker, and the two logs would differ by it
    items.insert(draw(st.integers(0, len(items))), (props.UNIQ_KEY, f"ID{next(_IDS):032X}"))
    for key, values in _RARE.items():
        if draw(st.integers(0, 5)) == 0:
            items.insert(draw(st.integers(0, len(items))), (key, draw(values)))
    return dict(items)


@pytest.fixture(scope="module")
def brokers(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Broker, Broker]]:
    """Two brokers, one clock: ``cut`` commits with the kept cut, ``fallback`` without it."""
    clock = FakeClock(start_ms=1_800_000_000_000)
    with tempfile.TemporaryDirectory() as tmp:

        async def open_one(name: str) -> Broker:
            broker = await Broker.open(
                BrokerConfig(data_dir=str(Path(tmp) / name), flush=FlushMode.SYNC), clock=clock
            )
            broker.topics.create("CutPay", queues=3)
            return broker

        pair = (loop.run_until_complete(open_one("cut")), loop.run_until_complete(open_one("fallback")))
        yield pair
        for broker in pair:
            loop.run_until_complete(broker.close())


def _half(
    broker: Broker, topic: str, body: bytes, properties: dict[str, str], ctx: SendContext
) -> HalfAppend:
    """As the remoting door appends a half: the lane, else the general path."""
    sender = broker.sender
    half = sender.half_lane_append(topic, body, dict(properties), ctx)
    if half is None:
        half = sender.half_append(to_message(topic, body, properties, TRANSACTION_PREPARED_TYPE), ctx)
    return half


def _log(broker: Broker, since: int) -> list[tuple[Any, ...]]:
    records, offset = [], since
    while offset < broker.store.max_physical_offset:
        r = broker.store.read(offset)
        records.append((r.topic, r.queue_id, r.queue_offset, bytes(r.properties), bytes(r.body),
                        r.sys_flag, r.prepared_transaction_offset, r.tags_code, r.born_host,
                        r.store_timestamp_ms))  # fmt: skip
        offset += r.size
    return records


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(
    properties=wire_properties(),
    body=st.sampled_from([b"x", b"body" * 64, bytes(range(256))]),
    group=st.sampled_from(["PG"] * 5 + [""]),
    queue_id=st.sampled_from([-1, -1, 0, 2]),
)
def test_a_commit_from_the_kept_cut_is_the_fallbacks_commit(
    brokers: tuple[Broker, Broker],
    loop: asyncio.AbstractEventLoop,
    properties: dict[str, str],
    body: bytes,
    group: str,
    queue_id: int,
) -> None:
    ctx = SendContext(producer_group=group or None, born_host="10.0.0.1:4242", queue_id=queue_id)
    starts = [broker.store.max_physical_offset for broker in brokers]
    results = []
    for broker in brokers:
        half = _half(broker, "CutPay", body, properties, ctx)
        loop.run_until_complete(half.durable)  # type: ignore[arg-type]
        txid, _ = broker.sender.half_answer_fields(half)
        results.append((half, txid))
    (half, txid), (other, other_txid) = results
    assert txid == other_txid and half.cut == other.cut
    lane = not any(k in properties for k in _RARE)
    assert (half.cut >= 0) == (lane and bool(group))  # no group: its pair follows the routing pairs
    event(f"cut {'known' if half.cut >= 0 else 'unknown'}")
    _, decoded, cut = brokers[0].transactions._halves[half.appended.physical_offset]
    assert cut == half.cut and decoded is half.properties
    if cut >= 0:
        data = half.fields.properties
        tail = (
            f"{props.REAL_TOPIC}\x01CutPay\x02{props.REAL_QUEUE_ID}\x01{decoded[props.REAL_QUEUE_ID]}\x02"
            f"{props.TRAN_MSG}\x01true\x02"
        ).encode()
        assert data[cut:] == tail
        spliced = spliced_properties(data, decoded, txid)
        assert spliced == data[:cut] + f"{props.TRANSACTION_ID}\x01{txid}\x02".encode()
    fallback = brokers[1].transactions._halves
    offset = other.appended.physical_offset
    fallback[offset] = (*fallback[offset][:2], -1)  # forgotten: this one commits the general way
    for broker, tx in zip(brokers, (txid, other_txid), strict=True):
        decide = broker.end_transaction(
            topic="CutPay", message_id=properties.get(props.UNIQ_KEY, ""), transaction_id=tx, commit=True,
            from_check=False,
        )  # fmt: skip
        loop.run_until_complete(decide)
    logs = [_log(broker, start) for broker, start in zip(brokers, starts, strict=True)]
    assert logs[0] == logs[1]  # half, committed message (or its delayed copy), op record
    assert len(logs[0]) == 3


def _stored(data: bytes) -> StoredTuple:
    return StoredTuple.of(
        StoredRecord(
            4096, 200, names.HALF_TOPIC, 0, 7, b"body", data, 1_800_000_000_000, 3,
            int(SysFlag.TRANSACTION_PREPARED), 1_799_999_999_000, "10.0.0.1:4242", 1_800_000_000_001,
            "10.0.0.2:10911", 0, 0,
        )
    )  # fmt: skip


_ROUTING = [(props.REAL_TOPIC, "Pay"), (props.REAL_QUEUE_ID, "0"), (props.TRAN_MSG, "true")]


@pytest.mark.parametrize(
    "pairs",
    [
        [("a", "1"), *_ROUTING],
        _ROUTING,
        [("a", "1"), ("b", "2"), *_ROUTING],
        [(props.DELAY, "2"), *_ROUTING],
        [(props.TRANSACTION_ID, "old"), *_ROUTING],
        [("a", "1"), *_ROUTING, (props.PRODUCER_GROUP, "PG")],
    ],
)
def test_a_cut_is_taken_only_where_it_starts_the_routing_pairs(pairs: list[tuple[str, str]]) -> None:
    """Any cut but one that starts the ``REAL_TOPIC`` pair (inside a pair, past the end, -1) gives
    what the fallback gives; so does that one for a half with a delay or a transaction id, and for a
    canonical half that ends with the routing pairs (what the lane records) it gives the same bytes."""
    decoded = dict(pairs)
    data = props.encode(decoded)
    half = _stored(data)
    want = committed_fields(half, decoded, "TXID", keys_of(decoded))
    routing_at = data.index(props.REAL_TOPIC.encode())
    for cut in range(-1, len(data) + 2):
        if cut == routing_at and pairs[-1][0] != props.TRAN_MSG:
            continue  # a cut the lane never records: its routing pairs are not the last ones
        assert committed_fields(half, decoded, "TXID", keys_of(decoded), cut) == want, cut
