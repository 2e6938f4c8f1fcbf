"""A broker on an in-memory faulty disk, flushed inline, for the regression tests."""

from __future__ import annotations

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.send import SendContext
from txmq.common.clock import FakeClock
from txmq.storage.api import FlushMode
from txmq.storage.fs import FaultyFileSystem

CTX = SendContext(producer_group="pg", born_host="10.0.0.1:1")


def config() -> BrokerConfig:
    return BrokerConfig(
        data_dir="/b", flush=FlushMode.SYNC, segment_bytes=64 * 1024, default_queues=2, delay_levels="1s 2s"
    )


async def open_broker(fs: FaultyFileSystem, clock: FakeClock) -> Broker:
    return await Broker.open(config(), clock=clock, fs=fs, inline_flush=True)
