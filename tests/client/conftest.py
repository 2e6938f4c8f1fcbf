"""Fixtures: one broker per test module (fast transaction checks, 100-300 ms delay levels)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.broker import FAST_FLAGS, BrokerProcess, require_remoting_server
from txmq.client._remoting_channel import RemotingChannel
from txmq.protocol.remoting.codes import PERM_READ_WRITE, RequestCode
from txmq.protocol.remoting.headers import CreateTopicRequestHeader

_names = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    require_remoting_server()
    process = BrokerProcess(Path(tmp_path_factory.mktemp("broker")), *FAST_FLAGS)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def unique() -> str:
    """A fresh suffix for topic and group names, so tests sharing a broker never interfere."""
    return f"t{next(_names)}"


async def create_topic(broker: BrokerProcess, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker's remoting door (the SDK has no admin API)."""
    channel = await RemotingChannel.open(broker.remoting)
    try:
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=PERM_READ_WRITE,
        )
        response = await channel.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
        assert response.code == 0, response.remark
    finally:
        await channel.close()
