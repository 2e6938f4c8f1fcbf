"""The send lane stores what the general send path stores, through both doors.

Two brokers on their own stores, one FakeClock: every generated 4.x send (single or batch) goes through
``to_message`` + ``Broker.send`` on one and ``to_lean`` + ``Broker.send_lean`` on the other. The results,
the stored records (byte for byte, but for a generated message id) and the key index agree, and so do
the errors (same class, same words).
"""

from __future__ import annotations

import asyncio
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.records import index_keys
from txmq.broker.send import SendContext
from txmq.broker.topics import Perm
from txmq.common import errors
from txmq.common import properties as props
from txmq.common.clock import FakeClock
from txmq.common.message import SendResult, TopicMessageType
from txmq.protocol.grpc import convert as grpc_convert
from txmq.protocol.grpc import pb
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.server.remoting.convert import to_lean, to_message
from txmq.storage.api import FlushMode, StoredRecord

_TEXT = st.text(alphabet=st.sampled_from("ab |-_é"), max_size=6) | st.just("v\x01")
_NAMES = st.sampled_from(
    ["a", "b", "user.x", "PGROUP", "REAL_TOPIC", "__TXMQ_TYPE", "WAIT", "RECONSUME_TIME"]
)
_SYSTEM = {
    props.TAGS: st.sampled_from(["", "t", "tag-1", "t", "tag-2", " t", "a||b", "x" * 200]),
    props.KEYS: st.sampled_from(
        ["", "k1", "k1 k2", "  k1  k2 ", "k" * 200, " ".join(f"k{i}" for i in range(40))]
    ),
    props.UNIQ_KEY: st.sampled_from(["", "ID-1", "0123456789ABCDEF0123456789ABCDEF01"]),
    props.SHARDING_KEY: st.sampled_from(["", "g1", "group-2", "g" * 200]),
}


@st.composite
def wire_properties(draw: st.DrawFn) -> dict[str, str]:
    """A 4.x message's properties as the header (or batch entry) decodes them, in wire order."""
    items = draw(st.lists(st.tuples(_NAMES, _TEXT), max_size=4))
    for key, values in _SYSTEM.items():
        if draw(st.booleans()):
            items.insert(draw(st.integers(0, len(items))), (key, draw(values)))
    return dict(items)


_BODIES = st.sampled_from([b"", b"x", b"body" * 64, b"y" * 7, b"z" * 100, b"w" * 3])


@pytest.fixture(scope="module")
def brokers(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Broker, Broker]]:
    clock = FakeClock(start_ms=1_800_000_000_000)
    with tempfile.TemporaryDirectory() as tmp:

        async def open_one(name: str) -> Broker:
            config = BrokerConfig(
                data_dir=str(Path(tmp) / name), flush=FlushMode.ASYNC, segment_bytes=64 << 20
            )
            return await Broker.open(config, clock=clock)

        pair = (loop.run_until_complete(open_one("general")), loop.run_until_complete(open_one("lane")))
        yield pair
        for broker in pair:
            loop.run_until_complete(broker.close())


def _outcome(coro: object, loop: asyncio.AbstractEventLoop) -> list[SendResult] | tuple[type, str]:
    try:
        return loop.run_until_complete(coro)  # type: ignore[arg-type]
    except errors.TxmqError as exc:
        return type(exc), exc.message


def _comparable(record: StoredRecord, generated_id: bool) -> tuple[object, ...]:
    decoded = props.decode(record.properties)
    if generated_id:
        assert len(decoded[props.UNIQ_KEY]) == 34
        decoded[props.UNIQ_KEY] = "generated"
    return (
        record.physical_offset, record.size, record.topic, record.queue_id, record.queue_offset,
        record.body, list(decoded.items()), record.tags_code, record.flag, record.sys_flag,
        record.born_timestamp_ms, record.born_host, record.store_timestamp_ms, record.reconsume_times,
        record.prepared_transaction_offset,
    )  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    messages=st.lists(st.tuples(_BODIES, wire_properties()), min_size=1, max_size=4),
    topic=st.sampled_from(
        ["LaneA", "LaneB", "LaneA", "LaneB", "LaneC", "RMQ_SYS_TRANS_HALF_TOPIC", "bad topic"]
    ),
    queue_id=st.sampled_from([None, 0, 3, 7]),
    producer_group=st.sampled_from([None, "", "PG"]),
)
def test_lane_stores_what_the_general_path_stores(
    brokers: tuple[Broker, Broker],
    loop: asyncio.AbstractEventLoop,
    messages: list[tuple[bytes, dict[str, str]]],
    topic: str,
    queue_id: int | None,
    producer_group: str | None,
) -> None:
    general, lane = brokers
    ctx = SendContext(producer_group=producer_group or None, born_host="10.0.0.1:4242", queue_id=queue_id)
    full = [to_message(topic, body, properties, 0) for body, properties in messages]
    lean = [to_lean(body, properties, 0) for body, properties in messages]
    assert all(m is not None for m in lean)
    expected = _outcome(general.send(full, ctx), loop)
    got = _outcome(lane.send_lean(topic, [m for m in lean if m is not None], ctx), loop)
    if isinstance(expected, tuple) or isinstance(got, tuple):
        event(f"rejected: {expected[0].__name__ if isinstance(expected, tuple) else '?'}")
        assert got == expected
        return
    event(f"stored {'a batch' if len(messages) > 1 else 'one'}")
    assert len(got) == len(expected)
    for mine, theirs, (_, properties) in zip(got, expected, messages, strict=True):
        generated = not properties.get(props.UNIQ_KEY)
        assert mine.queue == theirs.queue
        assert mine.queue_offset == theirs.queue_offset
        assert mine.offset_message_id == theirs.offset_message_id
        assert (mine.transaction_id, mine.recall_handle) == (theirs.transaction_id, theirs.recall_handle)
        if not generated:
            assert mine.message_id == theirs.message_id
        assert theirs.offset_message_id is not None
        offset = int(theirs.offset_message_id[16:], 16)
        mine_record, their_record = lane.store.read(offset), general.store.read(offset)
        assert _comparable(mine_record, generated) == _comparable(their_record, generated)
        assert mine.message_id in index_keys(topic, mine_record.properties)
        for key in index_keys(topic, mine_record.properties):
            found = [r.physical_offset for r in lane.store.query_by_key(key, 32)]
            assert offset in found
            if key != mine.message_id or not generated:
                assert found == [r.physical_offset for r in general.store.query_by_key(key, 32)]


@given(properties=wire_properties(), extra=st.sampled_from(["", props.DELAY, props.TRAN_MSG,
       props.TIMER_DELIVER_MS, props.CHECK_IMMUNITY_TIME_IN_SECONDS, "__SHARDING_KEY"]),
       sys_flag=st.sampled_from([0, TRANSACTION_PREPARED_TYPE]))  # fmt: skip
def test_the_lane_takes_only_normal_and_fifo(properties: dict[str, str], extra: str, sys_flag: int) -> None:
    if extra:
        properties[extra] = "1"
    lean = to_lean(b"body", properties, sys_flag)
    assert (lean is None) == bool(extra or sys_flag)
    if lean is not None:
        message = to_message("T", b"body", properties, sys_flag)
        assert (lean.body, lean.tags, lean.keys, lean.message_id, lean.message_group) == (
            message.body, message.tags, message.keys, message.message_id, message.message_group,
        )  # fmt: skip
        assert lean.properties == props.user_properties(message.properties)


@st.composite
def grpc_messages(draw: st.DrawFn, topic: str) -> Any:
    """A v2 ``Message`` of ``topic`` as a client sends it (NORMAL or FIFO, now and then not lean)."""
    sysp = pb.SystemProperties(
        tag=draw(st.sampled_from(["", "t", "tag-1", "t", "tag-2", "", " t", "a||b"])),
        keys=draw(
            st.lists(st.sampled_from(["k1", "k2", "k3", "k1", "k2", "", "a b", "k" * 200]), max_size=2)
        ),
        message_id=draw(st.sampled_from(["", "ID-1", "0123456789ABCDEF0123456789ABCDEF01"])),
        message_group=draw(st.sampled_from(["", "", "g1", "g" * 200])),
    )
    if draw(st.integers(0, 9)) == 0:
        sysp.message_type = pb.MessageType.TRANSACTION
    if draw(st.integers(0, 9)) == 0:
        sysp.body_encoding = pb.Encoding.GZIP
        body = zlib.compress(draw(_BODIES))
    else:
        body = draw(_BODIES)
    user = dict(
        draw(
            st.lists(
                st.tuples(st.sampled_from(["a", "PGROUP", "x.y", "b", "a", "x.y", "DELAY", ""]), _TEXT),
                max_size=3,
            )
        )
    )
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=sysp, user_properties=user)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(), topic=st.sampled_from(["GrpcA", "GrpcB", "GrpcA", "bad topic"]), count=st.integers(1, 2)
)
def test_grpc_lane_stores_what_the_general_path_stores(
    brokers: tuple[Broker, Broker],
    loop: asyncio.AbstractEventLoop,
    data: st.DataObject,
    topic: str,
    count: int,
) -> None:
    general, lane = brokers
    wires = [data.draw(grpc_messages(topic)) for _ in range(count)]
    ctx = SendContext(born_host="10.0.0.2:4242")
    try:
        lean = grpc_convert.to_lean(wires)
    except errors.TxmqError as exc:  # a body that does not decompress: the general way fails alike
        with pytest.raises(type(exc)):
            [grpc_convert.to_message(w) for w in wires]
        return
    if lean is None:
        event("not lean")
        return
    try:
        full = [grpc_convert.to_message(w) for w in wires]
    except errors.TxmqError as exc:
        with pytest.raises(type(exc)):
            grpc_convert.to_lean(wires)
        return
    expected = _outcome(general.send(full, ctx), loop)
    got = _outcome(lane.send_lean(lean[0], lean[1], ctx), loop)
    if isinstance(expected, tuple) or isinstance(got, tuple):
        event(f"rejected: {expected[0].__name__ if isinstance(expected, tuple) else '?'}")
        assert got == expected
        return
    event("stored")
    for mine, theirs, wire in zip(got, expected, wires, strict=True):
        generated = not wire.system_properties.message_id
        assert (mine.queue, mine.queue_offset, mine.offset_message_id) == (
            theirs.queue, theirs.queue_offset, theirs.offset_message_id,
        )  # fmt: skip
        assert generated or mine.message_id == theirs.message_id
        assert theirs.offset_message_id is not None
        offset = int(theirs.offset_message_id[16:], 16)
        assert _comparable(lane.store.read(offset), generated) == _comparable(
            general.store.read(offset), generated
        )


def test_lane_sees_topic_changes(brokers: tuple[Broker, Broker], loop: asyncio.AbstractEventLoop) -> None:
    """The lane remembers resolved topics; a topic made read-only or retyped is resolved afresh."""
    _, lane = brokers
    ctx = SendContext(born_host="10.0.0.3:1")
    message = to_lean(b"body", {props.TAGS: "t"}, 0)
    assert message is not None
    loop.run_until_complete(lane.send_lean("LaneChanging", [message], ctx))
    lane.topics.create("LaneChanging", perm=Perm.READ)
    assert _outcome(lane.send_lean("LaneChanging", [message], ctx), loop)[0] is errors.Forbidden
    lane.topics.create("LaneChanging", message_type=TopicMessageType.FIFO)
    assert _outcome(lane.send_lean("LaneChanging", [message], ctx), loop)[0] is errors.MessageTypeConflict
    lane.topics.create("LaneChanging")
    assert isinstance(_outcome(lane.send_lean("LaneChanging", [message], ctx), loop), list)
