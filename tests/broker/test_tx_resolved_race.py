"""A check-back answer racing the producer's commit of a watched half must not commit it again.

Seen from the Spark sink under load: the producer's COMMIT of a half was being stored while the
checker's round sent that half a check-back and stored the CHECK_SENT event; the commit resolved the
half (dropping it from the watched set), then CHECK_SENT was applied to a half no longer watched and
recreated it as a pending "early" record, so the check-back's answer (COMMIT) was applied a second
time: the message was put into its topic twice.
"""

from __future__ import annotations

import asyncio

from txmq.broker.broker import Broker
from txmq.common.clock import FakeClock

from .conftest import attach_producer
from .test_transactions import end, half, visible


async def test_a_check_answer_racing_the_producer_commit_is_a_duplicate(
    broker: Broker, clock: FakeClock
) -> None:
    channel = attach_producer(broker, "p1", "pg")
    mid, txid = await half(broker, b"once")
    clock.advance(6_000)
    await broker.tick(clock.now_ms())
    assert len(channel.checks) == 1  # watched and checked once
    clock.advance(30_000)  # due for its second check
    # the producer's commit is being stored while the round sends the second check-back
    await asyncio.gather(end(broker, mid, txid, True), broker.tick(clock.now_ms()))
    assert len(channel.checks) == 2
    await end(broker, mid, txid, True, from_check=True)  # the check-back's answer, arriving after
    assert await visible(broker) == [b"once"]
    decisions = [h for h in broker.transactions.show(txid)["history"] if h["kind"] == "DECISION"]
    assert len(decisions) == 1


async def test_a_decision_arriving_as_the_lock_passes_on_waits_its_turn(broker: Broker) -> None:
    """Three decisions on one half never decide side by side.

    A holds the half's turn and B waits for it. When A passes it on, B's wake-up has not run yet; C,
    arriving in that moment, must queue behind B, not find the turn free and decide next to B. (Stepped
    through the turn itself: the service is compiled, so its methods cannot be wrapped.)
    """
    service = broker.transactions
    a = await service._take_turn(7)
    b = asyncio.ensure_future(service._take_turn(7))
    await asyncio.sleep(0)  # B waits for A's turn
    service._pass_turn(7, a)  # B's waiter is resolved; B has not run yet
    c = asyncio.ensure_future(service._take_turn(7))
    for _ in range(3):
        await asyncio.sleep(0)
    assert b.done() and not c.done()  # C queued behind B
    service._pass_turn(7, b.result())
    turn = await asyncio.wait_for(c, 5)
    service._pass_turn(7, turn)
    assert service._deciding == {}

    mid, txid = await half(broker, b"turns")  # and three real decisions: one commit, stored once
    first = asyncio.ensure_future(end(broker, mid, txid, True))
    second = asyncio.ensure_future(end(broker, mid, txid, True, from_check=True))

    async def third() -> None:
        await first
        await end(broker, mid, txid, True, from_check=True)

    await asyncio.gather(first, second, third())
    assert await visible(broker) == [b"turns"]
    assert service._deciding == {}
