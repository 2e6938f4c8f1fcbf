"""Bounds and corrections the broker shares with Apache RocketMQ (session 20's field4 probes): invisible
durations (the proxy's ProxyConfig defaults, broker settings here), and a group offset past a queue's end
(Apache's POP commits the end; the admin view's lag)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.broker.admin import dispatch
from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.broker.config import BrokerConfig
from txmq.common import errors, limits
from txmq.common.clock import FakeClock

from .conftest import RecordingChannel, make_config
from .test_send_receive import receive, send

HOUR_MS = 3_600_000


async def test_receive_invisible_durations_are_bounded_as_the_apache_proxy_bounds_them(
    tmp_path: Path, clock: FakeClock
) -> None:
    """ReceiveMessage took 1 s .. 12 h. Apache's proxy refuses a receive under 10 s
    (minInvisibleTimeMillsForRecv) or over 12 h (maxInvisibleTimeMills) with ILLEGAL_INVISIBLE_TIME;
    ChangeInvisibleDuration takes 0 .. 12 h. Both bounds are broker settings with those defaults."""
    defaults = BrokerConfig()
    assert (defaults.receive_invisible_ms_min, defaults.invisible_ms_max) == (10_000, 12 * HOUR_MS)
    broker = await Broker.open(make_config(tmp_path, receive_invisible_ms_min=10_000), clock=clock)
    try:
        await send(broker, "t", b"payload")
        for invisible_ms in (1_000, 9_999, 12 * HOUR_MS + 1):
            with pytest.raises(errors.InvalidInvisibleTime, match=r"too (small|large)"):
                await receive(broker, "g", "t", invisible_ms=invisible_ms)
        (view,) = await receive(broker, "g", "t", invisible_ms=10_000)
        with pytest.raises(errors.InvalidInvisibleTime):
            broker.change_invisible(group="g", receipt_handle=view.receipt_handle or "", invisible_ms=-1)
        with pytest.raises(errors.InvalidInvisibleTime):
            broker.change_invisible(
                group="g", receipt_handle=view.receipt_handle or "", invisible_ms=12 * HOUR_MS + 1
            )
        handle = broker.change_invisible(group="g", receipt_handle=view.receipt_handle or "", invisible_ms=0)
        assert handle  # 0 is a change's minimum: the message is due again at once
    finally:
        await broker.close()


async def test_the_invisible_bounds_are_settings(tmp_path: Path, clock: FakeClock) -> None:
    broker = await Broker.open(
        make_config(tmp_path, receive_invisible_ms_min=500, invisible_ms_max=2 * HOUR_MS), clock=clock
    )
    try:
        await send(broker, "t", b"payload")
        with pytest.raises(errors.InvalidInvisibleTime, match="7200000 ms"):
            await receive(broker, "g", "t", invisible_ms=2 * HOUR_MS + 1)
        assert len(await receive(broker, "g", "t", invisible_ms=500)) == 1
    finally:
        await broker.close()
    for bad in (
        {"receive_invisible_ms_min": -1},
        {"receive_invisible_ms_min": 70_000},  # above the auto-renew lease (60 s)
        {"invisible_ms_max": 30_000},
    ):
        with pytest.raises(errors.InvalidArgument, match="invisible durations"):
            BrokerConfig(**bad).validate()  # type: ignore[arg-type]
    assert BrokerConfig().grpc_receive_batch_max == limits.grpc_receive_batch_max_default == 32
    for batch_max in (0, limits.receive_batch_max + 1):
        with pytest.raises(errors.InvalidArgument, match="grpc_receive_batch_max"):
            BrokerConfig(grpc_receive_batch_max=batch_max).validate()


async def test_a_pop_group_offset_past_the_queue_end_is_corrected_to_the_end(broker: Broker) -> None:
    """An offset committed past a queue's end (a client's UPDATE_CONSUMER_OFFSET, or a log that lost
    its unflushed tail) made a POP group start there: the messages appended below it were never
    delivered, and ``group describe`` showed a negative lag (-1 one past the end). Apache's POP
    commits the queue's end instead (PopMessageProcessor: "Pop initial offset, because store is no
    correct")."""
    broker.topics.create("t", queues=1)
    await send(broker, "t", b"before")
    broker.update_offset("g", "t", 0, 2)  # one past the end (the end is 1)
    described = await dispatch(broker, "group.describe", {"group": "g"})
    assert [(q["offset"], q["max_offset"], q["lag"]) for q in described["queues"]] == [(2, 1, 0)]
    assert await receive(broker, "g", "t") == []  # nothing new; the offset is corrected to the end
    assert broker.get_offset("g", "t", 0) == 1
    await send(broker, "t", b"after")  # offset 1, below the committed 2
    got = await receive(broker, "g", "t")
    assert [v.body for v in got] == [b"after"]


async def _renewed_receive(broker: Broker, clock: FakeClock, client: str) -> str:
    broker.topics.create("t", queues=1)
    await send(broker, "t", b"long job")
    (view,) = await receive(broker, "g", "t", invisible_ms=broker.config.invisible_ms_auto_renew)
    broker.renew_for("g", client, [view])
    return view.receipt_handle or ""


async def _tick_for(
    broker: Broker, clock: FakeClock, ms: int, step_ms: int = 5_000, heartbeat: str | None = None
) -> None:
    for _ in range(ms // step_ms):
        clock.advance(step_ms)
        if heartbeat is not None:  # a live client heartbeats (silent past the expiry: gone)
            broker.clients.touch(heartbeat)
        await broker.tick(clock.now_ms())


async def test_an_auto_renew_lease_is_renewed_while_its_client_lives(
    broker: Broker, clock: FakeClock
) -> None:
    """The Apache proxy renews an auto-renew receive's lease (10 s ahead, for up to 3 h) until the
    client acks it; txmq leased it once, so a push consumer's listener running over the lease got the
    message again. Renewed under the same handle: the client's ack still works."""
    broker.clients.touch("c1", kind=ClientKind.SIMPLE_CONSUMER, groups={"g"}, channel=RecordingChannel())
    handle = await _renewed_receive(broker, clock, "c1")
    await _tick_for(broker, clock, 10 * 60_000, heartbeat="c1")  # ten minutes: renewed 1 m, 3 m, 5 m, 10 m
    assert await receive(broker, "g", "t") == []
    broker.ack(group="g", receipt_handle=handle)
    await _tick_for(broker, clock, 120_000)
    assert await receive(broker, "g", "t") == []  # acked: nothing comes back


async def test_an_auto_renew_lease_ends_when_its_client_is_gone_or_after_3_hours(
    broker: Broker, clock: FakeClock
) -> None:
    await _renewed_receive(broker, clock, "gone")  # a client the broker does not know: not renewed
    await _tick_for(broker, clock, 65_000)
    assert [v.body for v in await receive(broker, "g", "t")] == [b"long job"]
    broker.clients.touch("c1", kind=ClientKind.SIMPLE_CONSUMER, groups={"g"}, channel=RecordingChannel())
    await send(broker, "t", b"endless")
    (view,) = [v for v in await receive(broker, "g", "t", invisible_ms=60_000) if v.body == b"endless"]
    broker.renew_for("g", "c1", [view])
    # renewed 1 m, 3 m, 5 m, 10 m, 30 m, then 1 h at a time; the renewal due at 13710 s, past 3 h, is a
    # nack with the group's retry delay for attempt 1 (1 s): test_auto_renew_end has the details
    await _tick_for(broker, clock, 13_700_000, step_ms=10_000, heartbeat="c1")
    assert b"endless" not in [v.body for v in await receive(broker, "g", "t")]
    await _tick_for(broker, clock, 20_000, step_ms=10_000, heartbeat="c1")
    assert b"endless" in [v.body for v in await receive(broker, "g", "t")]
