"""How an auto-renewed lease grows and how it ends, as Apache's proxy does it (renew5).

Apache (proxy DefaultReceiptHandleManager, RenewStrategyPolicy, ProxyConfig): a renewal is due 10 s
before the lease ends; renewal n leases 1 m, 3 m, 5 m, 10 m, 30 m, then 1 h each; the first renewal due
3 h or more after the receive is not made: the lease is changed to the group's retry delay for the
message's reconsume count instead (a nack, the STOP_RENEW event), so the message comes back as a
retry. txmq renewed 60 s each time and, after 3 h, let the lease run out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.common import errors
from txmq.common.clock import FakeClock
from txmq.common.message import MessageView

from .conftest import RecordingChannel, make_config
from .test_send_receive import receive, send

S = 1_000
# receive at 0 with the 60 s auto-renew lease: renewals at 50 s, 100 s, 270 s, 560 s, 1150 s, 2940 s,
# 6530 s, 10120 s (the last one before 3 h = 10800 s); the one due at 13710 s is the nack
RENEWED_AT_S = [50, 100, 270, 560, 1150, 2940, 6530, 10120]
LEASES_MS = [60 * S, 180 * S, 300 * S, 600 * S, 1800 * S, 3600 * S, 3600 * S, 3600 * S]
NACKED_AT_S = 13710


@pytest.fixture
async def slow_retries(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Broker]:
    config = make_config(tmp_path / "data", retry_backoff_ms=(600 * S, 1200 * S))
    instance = await Broker.open(config, clock=clock)
    instance.topics.create("t", queues=1)
    instance.clients.touch("c1", kind=ClientKind.PUSH_CONSUMER, groups={"g"}, channel=RecordingChannel())
    yield instance
    await instance.close()


async def _auto_renew_receive(broker: Broker) -> MessageView:
    views: list[MessageView] = await receive(
        broker, "g", "t", invisible_ms=broker.config.invisible_ms_auto_renew
    )
    broker.renew_for("g", "c1", views)
    return views[0]


async def _step_to(broker: Broker, clock: FakeClock, start_ms: int, until_s: int) -> None:
    """Tick every 10 s (the renewal points above are on that grid), the client heartbeating."""
    while clock.now_ms() < start_ms + until_s * S:
        clock.advance(10 * S)
        broker.clients.touch("c1")
        await broker.tick(clock.now_ms())


async def test_renewals_lease_1_3_5_10_30_minutes_then_an_hour(broker: Broker, clock: FakeClock) -> None:
    broker.topics.create("t", queues=1)
    broker.clients.touch("c1", kind=ClientKind.PUSH_CONSUMER, groups={"g"}, channel=RecordingChannel())
    await send(broker, "t", b"long job")
    start = clock.now_ms()
    view = await _auto_renew_receive(broker)
    handle = view.receipt_handle or ""
    deadline = broker.pop.deadline_of("g", handle)
    seen: list[tuple[int, int]] = []
    while clock.now_ms() < start + (RENEWED_AT_S[-1] + 10) * S:
        clock.advance(10 * S)
        broker.clients.touch("c1")
        await broker.tick(clock.now_ms())
        now_deadline = broker.pop.deadline_of("g", handle)
        assert now_deadline is not None  # renewed under the same handle all along
        if now_deadline != deadline:
            seen.append(((clock.now_ms() - start) // S, now_deadline - clock.now_ms()))
            deadline = now_deadline
    assert seen == list(zip(RENEWED_AT_S, LEASES_MS, strict=True))
    broker.ack(group="g", receipt_handle=handle)  # the consumer's handle still acks it


async def test_at_the_3_hour_limit_the_message_is_nacked_with_the_groups_retry_delay(
    slow_retries: Broker, clock: FakeClock
) -> None:
    broker = slow_retries
    await send(broker, "t", b"stuck")
    start = clock.now_ms()
    first = await _auto_renew_receive(broker)
    await _step_to(broker, clock, start, NACKED_AT_S - 10)
    assert broker.pop.deadline_of("g", first.receipt_handle or "") is not None  # still renewed
    await _step_to(broker, clock, start, NACKED_AT_S)
    # nacked: a new lease under a handle nobody holds, ending after the retry delay of attempt 1 (600 s)
    assert broker.pop.deadline_of("g", first.receipt_handle or "") is None
    with pytest.raises(errors.InvalidReceiptHandle):
        broker.ack(group="g", receipt_handle=first.receipt_handle or "")  # too late: it comes back
    await _step_to(broker, clock, start, NACKED_AT_S + 590)
    assert await receive(broker, "g", "t") == []
    await _step_to(broker, clock, start, NACKED_AT_S + 600)
    (again,) = await receive(broker, "g", "t", invisible_ms=broker.config.invisible_ms_auto_renew)
    assert (again.body, again.delivery_attempt) == (b"stuck", 2)


async def test_the_nack_delay_follows_the_delivery_attempt(slow_retries: Broker, clock: FakeClock) -> None:
    """A second delivery renewed for 3 h takes the group's delay for attempt 2 (1200 s, not 600 s)."""
    broker = slow_retries
    await send(broker, "t", b"stuck twice")
    (first,) = await receive(broker, "g", "t")
    broker.change_invisible(group="g", receipt_handle=first.receipt_handle or "", invisible_ms=0)
    clock.advance(S)
    await broker.tick(clock.now_ms())  # the nacked lease ends: revived as a retry
    start = clock.now_ms()
    second = await _auto_renew_receive(broker)
    assert second.delivery_attempt == 2
    await _step_to(broker, clock, start, NACKED_AT_S)
    assert broker.pop.deadline_of("g", second.receipt_handle or "") is None  # nacked
    await _step_to(broker, clock, start, NACKED_AT_S + 1190)
    assert await receive(broker, "g", "t") == []
    await _step_to(broker, clock, start, NACKED_AT_S + 1200)
    assert [(v.body, v.delivery_attempt) for v in await receive(broker, "g", "t")] == [(b"stuck twice", 3)]
