"""Regression (found by the chaos run): behind a proxy whose broker is down, every TCP connect succeeds
and is reset at once; the SDK's channel pool counted the connect as success and reconnected in a hot
loop (382 connections in three short outages). A channel that never answered now counts as a failure."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from tests.conftest import free_port
from txmq.client._backoff import Backoff
from txmq.client._remoting_channel import ChannelPool
from txmq.common import errors
from txmq.protocol.remoting.codes import RequestCode
from txmq.testing.proxy import QUIET, FaultProxy, FaultSchedule


@dataclass(frozen=True)
class RecordingBackoff(Backoff):
    asked: list[int] = field(default_factory=list)

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float:
        self.asked.append(attempt)
        return 0.0


async def test_regression_reconnect_hot_loop_behind_a_proxy_to_a_dead_broker() -> None:
    proxy = FaultProxy(("127.0.0.1", free_port()), FaultSchedule(0, QUIET))  # nothing listens upstream
    await proxy.start()
    backoff = RecordingBackoff()
    pool = ChannelPool(backoff=backoff)
    try:
        for _ in range(4):
            channel = await pool.get(proxy.address)
            try:
                await channel.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"}, timeout_s=2)
            except errors.TxmqError:
                pass
            await asyncio.sleep(0)
    finally:
        await pool.close()
        await proxy.close()
    assert proxy.figures.upstream_failures == 4
    assert backoff.asked == [0, 1, 2]
