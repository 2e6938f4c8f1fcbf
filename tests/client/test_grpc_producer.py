"""Every send mode and transactions (with check-back) over the gRPC transport, against a real broker."""

from __future__ import annotations

import time

import pytest

from tests.client.broker import BrokerProcess
from tests.client.grpc_helpers import drain
from txmq.client import (
    LocalTransactionState,
    Message,
    MessageView,
    Producer,
    SendResult,
    SimpleConsumer,
    TransactionProducer,
    Unsupported,
    select_by_hash,
)


async def test_every_send_mode_arrives(broker: BrokerProcess, unique: str) -> None:
    called: list[SendResult | None] = []
    async with Producer(broker.grpc, transport="grpc") as producer:
        sent = [await producer.send(Message(unique, b"sync", tags="a", keys=("k1",), properties={"p": "1"}))]
        future = await producer.send_async(Message(unique, b"async"), lambda r, e: called.append(r))
        sent.append(await future)
        sent += await producer.send_batch([Message(unique, b"b1"), Message(unique, b"b2")])
        sent.append(await producer.send(Message(unique, b"fifo", message_group="g1")))
        # Due a little after this send even on a loaded machine (a timestamp already past when the broker
        # stores it makes an ordinary message, without the timer property).
        later = int(time.time() * 1000) + 1_000
        sent.append(await producer.send(Message(unique, b"timer", delivery_timestamp_ms=later)))
        await producer.send_oneway(Message(unique, b"oneway", tags="ow"))
        with pytest.raises(Unsupported):
            await producer.send(Message(unique, b"x"), selector=select_by_hash, arg=1)
    assert called == [sent[1]]
    async with SimpleConsumer(f"g{unique}", broker.grpc, subscriptions={unique: "*"}) as consumer:
        got = {m.body: m for m in await drain(consumer, 7)}
    assert set(got) == {b"sync", b"async", b"b1", b"b2", b"fifo", b"timer", b"oneway"}
    assert {got[m.body].message_id for m in got.values() if m.body != b"oneway"} >= {
        r.message_id for r in sent
    }
    first = got[b"sync"]
    assert (first.tags, first.keys, dict(first.properties)) == ("a", ("k1",), {"p": "1"})
    assert got[b"fifo"].message_group == "g1"
    assert got[b"timer"].delivery_timestamp_ms == later
    assert got[b"oneway"].tags == "ow"


class Listener:
    def __init__(self) -> None:
        self.checked: list[bytes] = []

    def execute_local_transaction(self, msg: MessageView, arg: object) -> LocalTransactionState:
        return {
            b"commit": LocalTransactionState.COMMIT_MESSAGE,
            b"rollback": LocalTransactionState.ROLLBACK_MESSAGE,
        }.get(msg.body, LocalTransactionState.UNKNOW)

    def check_local_transaction(self, msg: MessageView) -> LocalTransactionState:
        self.checked.append(msg.body)
        return LocalTransactionState.COMMIT_MESSAGE


async def test_transactions_and_check_back(broker: BrokerProcess, unique: str) -> None:
    listener = Listener()
    async with TransactionProducer(f"tx{unique}", listener, broker.grpc, transport="grpc") as producer:
        for body in (b"commit", b"rollback", b"unknown"):
            half, _ = await producer.send_message_in_transaction(Message(unique, body))
            assert half.transaction_id
        async with SimpleConsumer(f"g{unique}", broker.grpc, subscriptions={unique: "*"}) as consumer:
            got = await drain(consumer, 2)
            assert sorted(m.body for m in got) == [b"commit", b"unknown"]
            assert await consumer.receive(8, 10, wait_s=0.5) == []
    assert b"unknown" in listener.checked
    assert b"rollback" not in listener.checked


async def test_delay_level_uses_the_standard_table(broker: BrokerProcess, unique: str) -> None:
    async with Producer(broker.grpc, transport="grpc") as producer:
        before = int(time.time() * 1000)
        await producer.send(Message(unique, b"later", delay_level=1))
    async with SimpleConsumer(f"g{unique}", broker.grpc, subscriptions={unique: "*"}) as consumer:
        got = await drain(consumer, 1)
    assert [m.body for m in got] == [b"later"]
    assert got[0].delivery_timestamp_ms is not None and got[0].delivery_timestamp_ms >= before + 1000
