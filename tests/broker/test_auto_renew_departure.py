"""Auto-renewed leases of a client that went away (robust4). The broker renews a PushConsumer's leases
while the client lives (field4); when it goes (NotifyClientTermination, its Telemetry stream closed
and not reopened, heartbeats silent past the client expiry) Apache's proxy cuts them to 1 s
(DefaultReceiptHandleManager.clearGroup, ProxyConfig.invisibleTimeMillisWhenClear): another consumer
of the group gets the messages in seconds. Before, txmq let them run to the end of the 60 s lease."""

from __future__ import annotations

from pathlib import Path

from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.common import limits
from txmq.common.clock import FakeClock

from .conftest import RecordingChannel, make_config
from .test_send_receive import receive, send


def _attach(broker: Broker, client: str) -> RecordingChannel:
    channel = RecordingChannel()
    broker.clients.touch(client, kind=ClientKind.PUSH_CONSUMER, groups={"g"}, channel=channel)
    return channel


async def _renewed_receive(broker: Broker, client: str, body: bytes = b"long job") -> str:
    if broker.topics.get("t") is None:
        broker.topics.create("t", queues=1)
    await send(broker, "t", body)
    (view,) = await receive(broker, "g", "t", invisible_ms=broker.config.invisible_ms_auto_renew)
    broker.renew_for("g", client, [view])
    return view.receipt_handle or ""


async def _tick_for(
    broker: Broker, clock: FakeClock, ms: int, step_ms: int = 250, heartbeat: str | None = None
) -> None:
    for _ in range(ms // step_ms):
        clock.advance(step_ms)
        if heartbeat is not None:  # a live client heartbeats (the official clients: every 10 s)
            broker.clients.touch(heartbeat)
        await broker.tick(clock.now_ms())


async def _visible(broker: Broker) -> list[bytes]:
    return [v.body for v in await receive(broker, "g", "t")]


async def test_a_terminated_clients_leases_come_back_in_about_a_second(
    broker: Broker, clock: FakeClock
) -> None:
    _attach(broker, "c1")
    await _renewed_receive(broker, "c1")
    await _tick_for(broker, clock, 120_000, step_ms=5_000, heartbeat="c1")  # renewed past 60 s
    assert await _visible(broker) == []
    broker.clients.remove("c1")  # what NotifyClientTermination does
    await _tick_for(broker, clock, 500)
    assert await _visible(broker) == []  # the lease is cut to 1 s, not dropped
    await _tick_for(broker, clock, limits.auto_renew_clear_ms)
    assert await _visible(broker) == [b"long job"]


async def test_a_closed_stream_cuts_the_leases_after_the_grace_and_a_reopened_one_keeps_them(
    broker: Broker, clock: FakeClock
) -> None:
    channel = _attach(broker, "c1")
    await _renewed_receive(broker, "c1")
    # a client rebuilding its Telemetry stream: closed, then a new one within the grace
    broker.clients.detach_channel("c1", channel)
    await _tick_for(broker, clock, limits.client_detached_grace_ms - 500, heartbeat="c1")
    channel = _attach(broker, "c1")
    await _tick_for(broker, clock, 10 * 60_000, step_ms=5_000, heartbeat="c1")
    assert await _visible(broker) == []  # still renewed: ten minutes later nothing came back
    # a client killed: its stream closes and nothing reattaches (its heartbeats stop too)
    broker.clients.detach_channel("c1", channel)
    await _tick_for(broker, clock, limits.client_detached_grace_ms - 250)
    assert await _visible(broker) == []
    await _tick_for(broker, clock, 250 + limits.auto_renew_clear_ms + 250)
    assert await _visible(broker) == [b"long job"]


async def test_heartbeats_silent_past_the_expiry_cut_the_leases(broker: Broker, clock: FakeClock) -> None:
    """The channel still looks open (a half-open connection), but the client stopped heartbeating: it is
    gone after the client expiry (120 s, Apache's channelExpiredTimeout), and its leases with it."""
    _attach(broker, "c1")
    await _renewed_receive(broker, "c1")
    await _tick_for(broker, clock, 119_000, step_ms=1_000)
    assert await _visible(broker) == []
    await _tick_for(broker, clock, 1_000 + limits.auto_renew_clear_ms + 500, step_ms=250)
    assert await _visible(broker) == [b"long job"]


async def test_only_the_departed_clients_leases_are_cut_and_acked_ones_stay_acked(
    broker: Broker, clock: FakeClock
) -> None:
    _attach(broker, "c1")
    _attach(broker, "c2")
    acked = await _renewed_receive(broker, "c1", b"done")
    await _renewed_receive(broker, "c1", b"c1 job")
    await _renewed_receive(broker, "c2", b"c2 job")
    broker.ack(group="g", receipt_handle=acked)
    broker.clients.remove("c1")
    await _tick_for(broker, clock, 3_000, heartbeat="c2")
    assert await _visible(broker) == [b"c1 job"]  # c2's lease holds; the acked message stays acked
    await _tick_for(broker, clock, 5 * 60_000, step_ms=5_000, heartbeat="c2")
    assert b"c2 job" not in await _visible(broker)


async def test_a_clean_stop_cuts_renewed_leases_to_a_second_and_nothing_is_lost(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Renewals live in memory (as the proxy's). A clean stop cuts every renewed lease to 1 s before it
    saves the leases, as the proxy's shutdown does (clearAllHandle): txmq saved the lease as it stood,
    now up to an hour long (renewals grow to 1 h), which a consumer that does not come back would hold
    after the restart. After a crash the message comes again from the group's offset. Never lost."""
    config = make_config(tmp_path / "data")
    broker = await Broker.open(config, clock=clock)
    _attach(broker, "c1")
    handle = await _renewed_receive(broker, "c1")
    await _tick_for(broker, clock, 100_000, step_ms=5_000, heartbeat="c1")  # renewed past 60 s
    assert (broker.pop.deadline_of("g", handle) or 0) > clock.now_ms() + 60_000
    stopped_at = clock.now_ms()
    await broker.close()
    broker = await Broker.open(config, clock=clock)
    try:
        _attach(broker, "c1")  # the client comes back: the lease is not renewed any more
        assert broker.pop.deadline_of("g", handle) == stopped_at + limits.auto_renew_clear_ms
        assert await _visible(broker) == []
        await _tick_for(broker, clock, limits.auto_renew_clear_ms + 500, step_ms=500, heartbeat="c1")
        assert await _visible(broker) == [b"long job"]
    finally:
        await broker.close()
