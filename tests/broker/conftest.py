"""A real broker on a real store in a temp dir, driven step by step with a FakeClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.broker.config import BrokerConfig
from txmq.common.clock import FakeClock
from txmq.common.message import MessageView
from txmq.storage.api import FlushMode


@dataclass
class RecordingChannel:
    """A producer's channel as the broker sees it: records the check-backs it was handed."""

    open: bool = True
    checks: list[tuple[MessageView, str]] = field(default_factory=list)

    def send_check(self, message: MessageView, transaction_id: str) -> bool:
        if not self.open:
            return False
        self.checks.append((message, transaction_id))
        return True

    def is_open(self) -> bool:
        return self.open


def make_config(path: Path, **overrides: object) -> BrokerConfig:
    base = BrokerConfig(
        data_dir=str(path),
        flush=FlushMode.SYNC,
        segment_bytes=256 * 1024,
        transaction_timeout_ms=6_000,
        transaction_check_interval_ms=30_000,
        transaction_check_max=3,
        receive_invisible_ms_min=1_000,  # short leases expire within a test's few clock steps
    )
    return base.with_overrides(**overrides)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_ms=1_800_000_000_000)


@pytest.fixture
async def broker(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Broker]:
    instance = await Broker.open(make_config(tmp_path / "data"), clock=clock)
    yield instance
    await instance.close()


def attach_producer(broker: Broker, client_id: str, group: str) -> RecordingChannel:
    channel = RecordingChannel()
    broker.clients.touch(client_id, kind=ClientKind.PRODUCER, groups={group}, channel=channel)
    return channel
