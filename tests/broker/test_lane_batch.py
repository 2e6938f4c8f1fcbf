"""The send lane's batch path (``SendService._lane_batch``: one clock reading, ids made at once, each
message's properties laid out by one format) answers and stores what the lane does message by message
(tests/property/test_send_lane.py holds it to the general path too); ``send_lean_batch`` gives the same
answers as columns."""

from __future__ import annotations

import re
from pathlib import Path

from txmq.broker.broker import Broker
from txmq.broker.send import _HEX16, SendContext, _hex16s
from txmq.common import msgid
from txmq.common.clock import FakeClock
from txmq.common.message import LeanMessage

from .conftest import make_config


def _batch() -> list[LeanMessage]:
    return [
        LeanMessage(f"body-{i}".encode(), {"a": "1"} if i == 2 else {}, "tag" if i % 2 else None,
                    (f"k{i}",) if i == 3 else (), f"ID-{i}", "g1" if i == 4 else None)
        for i in range(6)
    ]  # fmt: skip


async def test_batch_answers_and_stores_what_message_by_message_does(tmp_path: Path) -> None:
    ctx = SendContext(producer_group="pg", born_host="10.0.0.9:4242")
    brokers = []
    for name in ("lane", "each", "columns"):
        broker = await Broker.open(make_config(tmp_path / name), clock=FakeClock(start_ms=1_800_000_000_000))
        broker.topics.create("Orders", queues=4)
        brokers.append(broker)
    lane, each, columns = brokers
    try:
        got = await lane.send_lean("Orders", _batch(), ctx)
        expected = await each.sender._send_lean_each("Orders", _batch(), ctx)
        sent = await columns.send_lean_batch("Orders", _batch(), ctx)
        assert got == expected
        assert list(sent.message_ids) == [r.message_id for r in expected]
        assert list(sent.offset_ids) == [r.offset_message_id for r in expected]
        assert list(sent.queue_offsets) == [r.queue_offset for r in expected]
        assert list(sent.queue_ids) == [r.queue.queue_id for r in expected]
        for result in expected:
            offset = msgid.parse_offset_message_id(result.offset_message_id or "")
            assert offset is not None
            assert lane.store.read(offset[2]) == each.store.read(offset[2]) == columns.store.read(offset[2])
        assert lane.store.query_by_key("k3", 4) == each.store.query_by_key("k3", 4)
    finally:
        for broker in brokers:
            await broker.close()


def test_new_message_ids_are_what_new_message_id_makes() -> None:
    now = 1_800_000_123_456
    ids = [*msgid.new_message_ids(now, 5), msgid.new_message_id(now)]
    assert all(re.fullmatch("[0-9A-F]{34}", i) for i in ids)
    assert len({i[:-8] for i in ids}) == 1, "version, host, pid and seconds are shared"
    sequences = [int(i[-8:], 16) for i in ids]
    assert [(s - sequences[0]) % (1 << 32) for s in sequences] == list(range(6))


def test_offset_id_tails_of_a_batch_match_one_format_each() -> None:
    offsets = [0, 1, 255, 1 << 32, (1 << 63) - 1, 123_456_789_012]
    assert _hex16s(offsets) == [_HEX16(o) for o in offsets]
