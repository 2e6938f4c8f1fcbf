"""A 4.x half appended by its lane stores what ``to_message`` + ``half_append`` stores.

``SendService.half_lane_append`` (the remoting door's SEND_MESSAGE_V2 with TRANSACTION_PREPARED) builds
the half's record from the decoded properties, without a ``Message``. Two brokers on their own stores,
each with its own FakeClock at the same time: every generated half goes through the lane (the general
path when the lane declines it, as the door does) on one and through ``to_message`` + ``half_append``
on the other. The record fields (byte for byte), the properties in their order, where it landed, and
the errors (same class, same words) agree; the two stores stay in lockstep, so a queue choice taken
twice or skipped would show in every later example. The lane declines exactly the halves it leaves to
the general path (a delay, a delivery time, check immunity, no message id).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.send import HalfAppend, SendContext
from txmq.common import properties as props
from txmq.common.clock import FakeClock
from txmq.common.message import TopicMessageType
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.server.remoting.convert import to_message
from txmq.storage.api import FlushMode

_TEXT = st.text(alphabet=st.sampled_from("ab |-_é"), max_size=6)
_VALUES = st.one_of(*[_TEXT] * 12, st.just("v" * 33_000))  # the last: over the properties' size
_NAMES = st.sampled_from(["a", "b", "user.x", "", "WAIT", "RECONSUME_TIME", "__SHARDING_KEY", "REAL_QID"])
_SYSTEM = {
    props.TAGS: st.sampled_from(["", "t", "tag-1", " t", "a||b", "x" * 200]),
    props.KEYS: st.sampled_from(
        ["", "k1", "k1 k2", "  k1  k2 ", "k" * 200, " ".join(f"k{i}" for i in range(40))]
    ),
    props.TRAN_MSG: st.sampled_from(["true", "false"]),
    props.PRODUCER_GROUP: st.sampled_from(["PG", "other"]),
    props.SHARDING_KEY: st.sampled_from(["", "g1"]),
    props.MESSAGE_TYPE: st.sampled_from(["NORMAL"]),
}
_RARE = {
    props.DELAY: st.sampled_from(["", "2", "x"]),
    props.TIMER_DELIVER_MS: st.sampled_from(["", "1800000005000", "soon"]),
    props.CHECK_IMMUNITY_TIME_IN_SECONDS: st.sampled_from(["30", "x"]),
}
_TOPICS = ["HalfLane"] * 12 + ["NormalOnly", "ReadOnly", "bad topic", "HalfLaneNew"]


@st.composite
def wire_properties(draw: st.DrawFn) -> dict[str, str]:
    """A half's properties as the header decodes them, in wire order (names and values hold no
    separator: the decode split on them)."""
    items = draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=4))
    for key, values in _SYSTEM.items():
        if draw(st.booleans()):
            items.insert(draw(st.integers(0, len(items))), (key, draw(values)))
    if draw(st.integers(0, 7)):  # nearly always a message id, as every client sends
        uniq = draw(st.sampled_from(["ID-1", "0123456789ABCDEF0123456789ABCDEF01", "ID-2", "ID-3", ""]))
        items.insert(draw(st.integers(0, len(items))), (props.UNIQ_KEY, uniq))
    for key, values in _RARE.items():
        if draw(st.integers(0, 11)) == 0:
            items.insert(draw(st.integers(0, len(items))), (key, draw(values)))
    return dict(items)


def _open(loop: asyncio.AbstractEventLoop, root: Path) -> Broker:
    config = BrokerConfig(data_dir=str(root), flush=FlushMode.ASYNC)
    broker = loop.run_until_complete(Broker.open(config, clock=FakeClock(start_ms=1_800_000_000_000)))
    broker.topics.create("HalfLane", queues=4)
    broker.topics.create("NormalOnly", queues=2, message_type=TopicMessageType.NORMAL)
    broker.topics.create("ReadOnly", queues=2, perm=4)  # readable only
    return broker


@pytest.fixture(scope="module")
def brokers(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Broker, Broker]]:
    with tempfile.TemporaryDirectory() as tmp:
        pair = _open(loop, Path(tmp) / "lane"), _open(loop, Path(tmp) / "general")
        yield pair
        for broker in pair:
            loop.run_until_complete(broker.close())


def _outcome(loop: asyncio.AbstractEventLoop, make: Any) -> tuple[str, Any]:
    """("ok", what the half stored and where) or ("error", class and words)."""
    try:
        half: HalfAppend = make()
    except Exception as exc:  # compared: class and words
        return "error", (type(exc).__name__, str(exc))
    loop.run_until_complete(half.durable)  # type: ignore[arg-type]
    appended = half.appended
    stored = (appended.physical_offset, appended.queue_offset, appended.size)
    return "ok", (half.topic.name, half.fields, list(half.properties.items()), stored)


@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(
    topic=st.sampled_from(_TOPICS),
    body=st.sampled_from([b"x", b"body" * 64, bytes(range(256))] * 4 + [b""]),
    properties=wire_properties(),
    group=st.sampled_from(["PG"] * 6 + ["", "P\x01G", "P\ud800G"]),  # a separator, text UTF-8 cannot hold
    host=st.sampled_from(["10.0.0.1:4242", "[::1]:4242"]),
    queue_id=st.sampled_from([-1] * 4 + [0, 3, 9]),
)
def test_the_half_lane_stores_what_the_general_path_stores(
    brokers: tuple[Broker, Broker],
    loop: asyncio.AbstractEventLoop,
    topic: str,
    body: bytes,
    properties: dict[str, str],
    group: str,
    host: str,
    queue_id: int,
) -> None:
    lane_broker, general_broker = brokers
    ctx = SendContext(producer_group=group or None, born_host=host, queue_id=queue_id)
    declined = any(k in properties for k in (props.DELAY, props.TIMER_DELIVER_MS,
                   props.CHECK_IMMUNITY_TIME_IN_SECONDS)) or not properties.get(props.UNIQ_KEY)  # fmt: skip
    taken: list[bool] = []

    def by_lane() -> HalfAppend:
        sender = lane_broker.sender
        half = sender.half_lane_append(topic, body, dict(properties), ctx)
        taken.append(half is not None)
        if half is None:  # what the door does then
            return sender.half_append(to_message(topic, body, properties, TRANSACTION_PREPARED_TYPE), ctx)
        return half

    def by_message() -> HalfAppend:
        message = to_message(topic, body, properties, TRANSACTION_PREPARED_TYPE)
        return general_broker.sender.half_append(message, ctx)

    lane = _outcome(loop, by_lane)
    general = _outcome(loop, by_message)
    if taken:
        assert taken == [not declined]
    event(f"lane {'declined' if declined else 'taken'}: {lane[0]}")
    if lane[0] == "ok" and general[0] == "ok" and not properties.get(props.UNIQ_KEY):
        # both went the general way, which made a message id each: the rest agrees
        lane_topic, lane_fields, lane_props, lane_at = lane[1]
        general_topic, general_fields, general_props, general_at = general[1]
        assert (lane_topic, lane_at) == (general_topic, general_at)
        assert lane_fields._replace(properties=b"", index_keys=()) == general_fields._replace(
            properties=b"", index_keys=()
        )
        assert [k for k, _ in lane_props] == [k for k, _ in general_props]
        return
    assert lane == general


def test_a_plain_sdk_half_takes_the_lane(
    brokers: tuple[Broker, Broker], loop: asyncio.AbstractEventLoop
) -> None:
    """The txmq SDK's half (message id, TRAN_MSG, producer group) is not declined."""
    properties = {props.UNIQ_KEY: "ID-SDK", props.TRAN_MSG: "true", props.PRODUCER_GROUP: "PG"}
    ctx = SendContext(producer_group="PG", born_host="10.0.0.1:4242", queue_id=1)
    half = brokers[0].sender.half_lane_append("HalfLane", b"body", properties, ctx)
    assert half is not None
    loop.run_until_complete(half.durable)  # type: ignore[arg-type]
    message = to_message("HalfLane", b"body", properties, TRANSACTION_PREPARED_TYPE)
    general = brokers[1].sender.half_append(message, ctx)  # the pair stays in lockstep
    loop.run_until_complete(general.durable)  # type: ignore[arg-type]
    assert half.fields == general.fields
    assert list(half.properties) == [
        props.UNIQ_KEY, props.PRODUCER_GROUP, props.MESSAGE_TYPE, props.REAL_TOPIC, props.REAL_QUEUE_ID,
        props.TRAN_MSG,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("properties", "group"),
    [
        ({"big": "v" * 33_000}, "PG"),  # over the properties' size once the system ones are added
        ({"big": "v" * 32_700}, "PG"),
        ({"": "v"}, "PG"),  # an empty name: refused by props.encode
        ({"a": "b"}, "P\x01G"),  # a separator in the producer group
        ({"a": "b"}, "P\ud800G"),  # text UTF-8 cannot hold
        ({f"n{i}": "v" for i in range(125)}, "PG"),  # over the property count with the system ones
        ({f"n{i}": "v" for i in range(110)}, ""),
    ],
)
def test_unusual_properties_give_what_the_general_path_gives(
    brokers: tuple[Broker, Broker], loop: asyncio.AbstractEventLoop, properties: dict[str, str], group: str
) -> None:
    properties = {props.UNIQ_KEY: "ID-U", **properties}
    ctx = SendContext(producer_group=group or None, born_host="10.0.0.1:4242", queue_id=-1)
    taken: list[bool] = []

    def by_lane() -> HalfAppend:
        half = brokers[0].sender.half_lane_append("HalfLane", b"body", dict(properties), ctx)
        taken.append(half is not None)
        assert half is not None
        return half

    def by_message() -> HalfAppend:
        message = to_message("HalfLane", b"body", properties, TRANSACTION_PREPARED_TYPE)
        return brokers[1].sender.half_append(message, ctx)

    assert _outcome(loop, by_lane) == _outcome(loop, by_message)
    assert taken in ([], [True])
