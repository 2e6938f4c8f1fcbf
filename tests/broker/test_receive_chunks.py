"""``Broker.receive_chunks``: a streamed receive leases its batch in steps, with receive()'s meaning."""

from __future__ import annotations

import pytest

from txmq.broker.broker import Broker
from txmq.broker.send import SendContext
from txmq.common import errors
from txmq.common.clock import FakeClock
from txmq.common.message import Message, MessageView

CTX = SendContext(producer_group="pg", born_host="127.0.0.1:1")


async def fill(broker: Broker, topic: str, count: int) -> None:
    for start in range(0, count, 50):
        batch = [Message(topic=topic, body=f"{i}".encode()) for i in range(start, min(count, start + 50))]
        await broker.send(batch, CTX)


async def chunks(broker: Broker, group: str, topic: str, batch: int, chunk: int) -> list[list[MessageView]]:
    found = []
    async for messages in broker.receive_chunks(
        group=group, topic=topic, expression="*", batch_size=batch, invisible_ms=10_000,
        long_poll_ms=0, chunk=chunk,
    ):  # fmt: skip
        found.append(messages)
    return found


async def test_chunks_deliver_what_one_receive_would(broker: Broker) -> None:
    await fill(broker, "t", 230)
    got = await chunks(broker, "g1", "t", batch=200, chunk=64)
    assert [len(c) for c in got] == [64, 64, 64, 8]  # never more than batch_size in all
    whole = await broker.receive(
        group="g2", topic="t", expression="*", batch_size=200, invisible_ms=10_000, long_poll_ms=0
    )
    flat = [v for c in got for v in c]
    assert sorted(v.body for v in flat) == sorted(v.body for v in whole)
    for view in flat:  # every chunk's messages are leased: their handles ack
        assert view.receipt_handle is not None
        broker.ack(group="g1", receipt_handle=view.receipt_handle)
    rest = await chunks(broker, "g1", "t", batch=200, chunk=64)
    assert [len(c) for c in rest] == [30]  # a short chunk ends the iteration


async def test_nothing_visible_yields_nothing_and_expiry_still_redelivers(
    broker: Broker, clock: FakeClock
) -> None:
    await fill(broker, "t", 3)
    assert [len(c) for c in await chunks(broker, "g", "t", batch=10, chunk=2)] == [2, 1]
    assert await chunks(broker, "g", "t", batch=10, chunk=2) == []  # all 3 in flight
    clock.advance(10_001)
    await broker.tick(clock.now_ms())  # revived into %RETRY%g
    again = [v for c in await chunks(broker, "g", "t", batch=10, chunk=2) for v in c]
    assert sorted(v.body for v in again) == [b"0", b"1", b"2"]
    assert {v.delivery_attempt for v in again} == {2}


async def test_invalid_arguments_raise_before_anything_is_leased(broker: Broker) -> None:
    await fill(broker, "t", 3)
    with pytest.raises(errors.InvalidArgument):
        await chunks(broker, "g", "t", batch=100_000, chunk=2)  # beyond receive_batch_max
    assert [len(c) for c in await chunks(broker, "g", "t", batch=10, chunk=2)] == [2, 1]
