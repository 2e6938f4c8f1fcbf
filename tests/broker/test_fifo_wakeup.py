"""Regression: a long-polling FIFO receive was woken by new arrivals only, not when an ack, a nack (a
changed invisible time) or a dead-letter move made its message group's next message deliverable, so
orderly gRPC consumers sat out the whole poll timeout. The clock never moves in these tests: the waiting
receive can only complete because the release woke it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from txmq.broker.broker import Broker
from txmq.broker.send import SendContext
from txmq.common.message import Message, MessageView

CTX = SendContext(producer_group="pg", born_host="127.0.0.1:1")
LONG_POLL_MS = 60_000  # far longer than the test may take: only a wake-up can end the wait
INVISIBLE_MS = 60_000


async def _fifo_pair(broker: Broker) -> MessageView:
    broker.topics.create("fifo", queues=1)
    broker.set_group_policy("g", fifo=True)
    for body in (b"first", b"second"):
        await broker.send([Message(topic="fifo", body=body, message_group="G")], CTX)
    (first,) = await _receive(broker, long_poll_ms=0)
    assert first.body == b"first"
    return first


async def _receive(broker: Broker, long_poll_ms: int) -> list[MessageView]:
    return await broker.receive(
        group="g",
        topic="fifo",
        expression="*",
        batch_size=32,
        invisible_ms=INVISIBLE_MS,
        long_poll_ms=long_poll_ms,
    )


async def _settle(task: asyncio.Task[list[MessageView]]) -> None:
    """Let the event loop run until the task is done or has nothing left to do (no clock, no sleep)."""
    for _ in range(200):
        if task.done():
            return
        await asyncio.sleep(0)


async def _waiting_receive_ends_after(broker: Broker, release: Callable[[], Awaitable[None]]) -> None:
    waiting = asyncio.ensure_future(_receive(broker, long_poll_ms=LONG_POLL_MS))
    try:
        await _settle(waiting)
        assert not waiting.done(), "the group's next message was delivered while the first was in flight"
        await release()
        await _settle(waiting)
        assert waiting.done(), "the long poll was not woken when the FIFO group's next message freed up"
        assert [v.body for v in waiting.result()] == [b"second"]
    finally:
        waiting.cancel()


async def test_fifo_long_poll_woken_by_ack(broker: Broker) -> None:
    first = await _fifo_pair(broker)
    assert first.receipt_handle is not None
    handle = first.receipt_handle

    async def ack() -> None:
        broker.ack(group="g", receipt_handle=handle)

    await _waiting_receive_ends_after(broker, ack)


async def test_fifo_long_poll_woken_by_dead_letter_move(broker: Broker) -> None:
    first = await _fifo_pair(broker)
    assert first.receipt_handle is not None
    handle = first.receipt_handle

    async def forward() -> None:
        await broker.forward_to_dlq(group="g", receipt_handle=handle)

    await _waiting_receive_ends_after(broker, forward)


async def test_fifo_long_poll_woken_by_nack(broker: Broker) -> None:
    """A nack (invisible time set to 0) makes the same message deliverable again at once."""
    first = await _fifo_pair(broker)
    assert first.receipt_handle is not None
    handle = first.receipt_handle
    waiting = asyncio.ensure_future(_receive(broker, long_poll_ms=LONG_POLL_MS))
    try:
        await _settle(waiting)
        assert not waiting.done()
        broker.change_invisible(group="g", receipt_handle=handle, invisible_ms=0)
        await _settle(waiting)
        assert waiting.done(), "the long poll was not woken when a nack made the message deliverable"
        got = waiting.result()
        assert [(v.body, v.delivery_attempt) for v in got] == [(b"first", 2)]
    finally:
        waiting.cancel()
