"""Two brokers share a transactional topic through one stand-alone name server: each decision reaches the
broker that holds its half. The SDK sent every END_TRANSACTION (and every check-back answer) to the broker
of the topic's first queue, so the other broker's halves stayed pending until its check-back, or for
ever when the checks were answered to the wrong broker too. Real broker and name-server processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.broker import BrokerProcess
from tests.integration.remoting_support import send, start_namesrv
from txmq.client import LocalTransactionState, Message, TransactionProducer
from txmq.common import errors
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.server.remoting_transport import connect

TOPIC = "TwoBrokerTx"
QUEUES = 4


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    home = tmp_path / "nshome"
    home.mkdir()
    namesrv, port = start_namesrv(home)
    brokers: list[BrokerProcess] = []
    try:
        for name in ("broker-a", "broker-b"):
            broker = BrokerProcess(
                tmp_path / name, "--broker-name", name, "--namesrv-addr", f"127.0.0.1:{port}",
                "--transaction-timeout", "10m", "--flush", "async",
            )  # fmt: skip
            broker.start()
            brokers.append(broker)
        brokers[0].namesrv_port = brokers[1].namesrv_port = port  # clients ask the stand-alone one
        yield brokers[0], brokers[1]
    finally:
        for broker in brokers:
            broker.stop()
        namesrv.terminate()
        namesrv.wait(timeout=15)


async def _max_offsets(broker: BrokerProcess) -> int:
    endpoint = await connect("127.0.0.1", broker.remoting_port)
    try:
        total = 0
        for queue_id in range(QUEUES):
            reply = await endpoint.request(
                RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(queue_id)}
            )
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            total += int(reply.ext_fields["offset"])
        return total
    finally:
        await endpoint.close()


async def _create_topic_on(broker: BrokerProcess) -> None:
    endpoint = await connect("127.0.0.1", broker.remoting_port)
    try:  # a plain send auto-creates the topic on this broker (one message in queue 0)
        assert (await send(endpoint, TOPIC, b"created", queue_id=0)).code == ResponseCode.SUCCESS
    finally:
        await endpoint.close()


async def _route_brokers(producer: TransactionProducer) -> set[str]:
    producer.transport.invalidate_route(TOPIC)
    try:
        return {q.broker_name for q in await producer.transport.route(TOPIC, for_write=True)}
    except errors.TopicNotFound:  # not registered yet
        return set()


class _Commit:
    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def test_each_commit_reaches_the_broker_holding_its_half(
    two_brokers: tuple[BrokerProcess, BrokerProcess],
) -> None:
    a, b = two_brokers
    for broker in (a, b):
        await _create_topic_on(broker)
    count = 16
    async with TransactionProducer("pg-two-brokers", _Commit(), a.namesrv) as producer:
        deadline = time.monotonic() + 60  # the brokers register their topic within a second or so
        while len(await _route_brokers(producer)) < 2:
            assert time.monotonic() < deadline, "the name server never routed the topic to both brokers"
            await asyncio.sleep(0.2)
        brokers_used = set()
        for i in range(count):
            half, state = await producer.send_message_in_transaction(Message(TOPIC, f"t{i}".encode()), None)
            assert state is LocalTransactionState.COMMIT_MESSAGE
            brokers_used.add(half.queue.broker_name)
        assert brokers_used == {"broker-a", "broker-b"}  # round robin over both brokers' queues
        # committed messages become visible in the topic at once (the check-back is 10 minutes away)
        deadline = time.monotonic() + 30
        while (visible := await _max_offsets(a) + await _max_offsets(b) - 2) < count:
            assert time.monotonic() < deadline, f"{visible} of {count} commits visible"
            await asyncio.sleep(0.2)
        assert visible == count
