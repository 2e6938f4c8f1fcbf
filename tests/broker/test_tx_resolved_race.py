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

    A holds the half's decision lock and B waits for it. When A releases, the lock reads unlocked
    before B has run; C, arriving in that moment, must queue behind B, not find the lock gone and
    decide next to B.
    """
    mid, txid = await half(broker, b"turns")
    service = broker.transactions
    inner = service._decide
    deciding = 0
    most = 0

    async def watched(*args: object) -> None:
        nonlocal deciding, most
        deciding += 1
        most = max(most, deciding)
        try:
            await asyncio.sleep(0)  # every decision holds the lock across a turn (B's would not store)
            await inner(*args)  # type: ignore[arg-type]
        finally:
            deciding -= 1

    service._decide = watched  # type: ignore[method-assign]
    first = asyncio.ensure_future(end(broker, mid, txid, True))
    second = asyncio.ensure_future(end(broker, mid, txid, True, from_check=True))

    async def third() -> None:
        await first  # C arrives just after A released, before B's wake-up has run to its end
        await end(broker, mid, txid, True, from_check=True)

    await asyncio.gather(first, second, third())
    assert most == 1
    assert await visible(broker) == [b"turns"]
    assert service._deciding == {}
