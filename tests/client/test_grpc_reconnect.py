"""The gRPC transport across a broker restart: sends resume, the Telemetry stream is reopened (so
check-backs reach the producer again)."""

from __future__ import annotations

import asyncio

from tests.client.broker import BrokerProcess
from tests.client.grpc_helpers import drain
from tests.client.helpers import wait_until
from txmq.client import LocalTransactionState, Message, MessageView, SimpleConsumer, TransactionProducer


class LeaveUnknown:
    def __init__(self) -> None:
        self.checked: list[bytes] = []

    def execute_local_transaction(self, msg: MessageView, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: MessageView) -> LocalTransactionState:
        self.checked.append(msg.body)
        return LocalTransactionState.COMMIT_MESSAGE


async def test_sends_and_check_backs_survive_a_restart(broker: BrokerProcess, unique: str) -> None:
    listener = LeaveUnknown()
    async with TransactionProducer(
        f"tx{unique}", listener, broker.grpc, transport="grpc", retries=6
    ) as producer:
        await producer.send_message_in_transaction(Message(unique, b"before"))
        await wait_until(lambda: b"before" in listener.checked, 60, "the first check-back")
        await asyncio.to_thread(broker.restart)
        await producer.send_message_in_transaction(Message(unique, b"after"))
        await wait_until(lambda: b"after" in listener.checked, 60, "a check-back after the restart")
    async with SimpleConsumer(f"g{unique}", broker.grpc, subscriptions={unique: "*"}) as consumer:
        got = await drain(consumer, 2)
    assert sorted(m.body for m in got) == [b"after", b"before"]
