"""POP leases across a clean broker restart: receipt handles stay valid and leased messages stay invisible
until their deadlines (a restart used to drop every lease: acks after it failed with
INVALID_RECEIPT_HANDLE and the messages came again at once, their attempt count back at 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.broker.broker import Broker
from txmq.common import errors
from txmq.common.clock import FakeClock

from .conftest import make_config
from .test_send_receive import receive, send


async def test_leases_survive_a_clean_restart(tmp_path: Path, clock: FakeClock) -> None:
    config = make_config(tmp_path)
    broker = await Broker.open(config, clock=clock)
    for body in (b"a", b"b", b"c", b"d"):
        await send(broker, "t", body)
    got = {v.body: v for v in await receive(broker, "g", "t", invisible_ms=60_000)}
    assert sorted(got) == [b"a", b"b", b"c", b"d"]
    broker.ack(group="g", receipt_handle=got[b"a"].receipt_handle or "")
    changed = broker.change_invisible(
        group="g", receipt_handle=got[b"d"].receipt_handle or "", invisible_ms=1_000
    )
    await broker.close()

    clock.advance(10_000)
    broker = await Broker.open(config, clock=clock)
    try:
        broker.ack(group="g", receipt_handle=got[b"b"].receipt_handle or "")  # a handle from before
        await broker.tick(clock.now_ms())
        again = await receive(broker, "g", "t", invisible_ms=60_000)
        assert [(v.body, v.delivery_attempt) for v in again] == [(b"d", 2)]  # its changed deadline passed
        with pytest.raises(errors.InvalidReceiptHandle):
            broker.ack(group="g", receipt_handle=changed)  # d was redelivered: its old handle is done
        clock.advance(50_001)  # c's deadline
        await broker.tick(clock.now_ms())
        late = await receive(broker, "g", "t", invisible_ms=60_000)
        assert [(v.body, v.delivery_attempt) for v in late] == [(b"c", 2)]
        with pytest.raises(errors.InvalidReceiptHandle):
            broker.ack(group="g", receipt_handle=got[b"b"].receipt_handle or "")  # used once
    finally:
        await broker.close()


async def test_leases_are_used_once(tmp_path: Path, clock: FakeClock) -> None:
    """The saved leases are read at one start only: a later start without a clean stop (a crash)
    must not bring back leases the broker has since forgotten."""
    config = make_config(tmp_path)
    broker = await Broker.open(config, clock=clock)
    await send(broker, "t", b"x")
    await receive(broker, "g", "t", invisible_ms=60_000)
    await broker.close()
    broker = await Broker.open(config, clock=clock)
    assert broker.pop.inflight_of("g") == 1
    await broker.store.close()  # stop without Broker.close: nothing saved, as in a crash,
    assert broker.store_lock is not None
    broker.store_lock.release()  # where the dying process's lock goes with it
    broker = await Broker.open(config, clock=clock)
    try:
        assert broker.pop.inflight_of("g") == 0
        assert [v.body for v in await receive(broker, "g", "t")] == [b"x"]  # at-least-once after a crash
    finally:
        await broker.close()


async def test_a_fifo_group_stays_blocked_by_its_lease_across_a_restart(
    tmp_path: Path, clock: FakeClock
) -> None:
    config = make_config(tmp_path)
    broker = await Broker.open(config, clock=clock)
    broker.set_group_policy("g", fifo=True)
    for body in (b"1", b"2"):
        await send(broker, "f", body, message_group="order-7")
    (first,) = await receive(broker, "g", "f", invisible_ms=60_000)
    assert first.body == b"1"
    await broker.close()
    broker = await Broker.open(config, clock=clock)
    try:
        assert await receive(broker, "g", "f", invisible_ms=60_000) == []  # 1 is still leased
        broker.ack(group="g", receipt_handle=first.receipt_handle or "")
        assert [v.body for v in await receive(broker, "g", "f", invisible_ms=60_000)] == [b"2"]
    finally:
        await broker.close()
