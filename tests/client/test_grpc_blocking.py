"""The blocking clients from plain threads, over both transports, against a real broker."""

from __future__ import annotations

import threading
import time

import pytest

from tests.client.broker import BrokerProcess
from txmq.client import (
    BlockingProducer,
    BlockingPushConsumer,
    BlockingSimpleConsumer,
    BlockingTransactionProducer,
    ConsumeResult,
    LocalTransactionState,
    Message,
    MessageView,
)


class Commit:
    def execute_local_transaction(self, msg: object, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def test_blocking_clients_over_grpc(broker: BrokerProcess, unique: str) -> None:
    with BlockingProducer(broker.grpc, transport="grpc") as producer:
        ids = {producer.send(Message(unique, b"sync")).message_id}
        ids.add(producer.send_async(Message(unique, b"async")).result(5).message_id)
        ids |= {r.message_id for r in producer.send_batch([Message(unique, b"b1"), Message(unique, b"b2")])}
        producer.send_oneway(Message(unique, b"oneway"))
    with BlockingTransactionProducer(f"tx{unique}", Commit(), broker.grpc, transport="grpc") as tx:
        half, state = tx.send_message_in_transaction(Message(unique, b"tx"))
    assert state is LocalTransactionState.COMMIT_MESSAGE
    ids.add(half.message_id)
    got: dict[str, MessageView] = {}
    with BlockingSimpleConsumer(f"g{unique}", broker.grpc, subscriptions={unique: "*"}) as consumer:
        deadline = time.monotonic() + 60
        while len(got) < 6 and time.monotonic() < deadline:
            for message in consumer.receive(16, 30, wait_s=1):
                got[message.message_id] = message
                consumer.ack(consumer.change_invisible_duration(message, 30))
    assert ids <= set(got)
    assert sorted(m.body for m in got.values()) == [b"async", b"b1", b"b2", b"oneway", b"sync", b"tx"]


@pytest.mark.parametrize("transport", ["remoting", "grpc"])
def test_blocking_push_consumer(broker: BrokerProcess, unique: str, transport: str) -> None:
    endpoints = broker.namesrv if transport == "remoting" else broker.grpc
    seen: list[bytes] = []
    done = threading.Event()

    def listener(messages: list[MessageView]) -> ConsumeResult:
        seen.extend(m.body for m in messages)
        if {b"m0", b"m1", b"m2"} <= set(seen):  # the warm-up may be delivered too (POP: from the start)
            done.set()
        return ConsumeResult.SUCCESS

    topic = f"{unique}{transport}"
    with BlockingProducer(endpoints, transport=transport) as producer:
        producer.send(Message(topic, b"warm-up"))  # creates the topic before the consumer subscribes
    with BlockingPushConsumer(
        f"g{topic}", endpoints, transport=transport, listener=listener, subscriptions={topic: "*"},
        rebalance_interval_s=0.5,
    ), BlockingProducer(endpoints, transport=transport) as producer:  # fmt: skip
        for i in range(3):
            producer.send(Message(topic, f"m{i}".encode()))
        assert done.wait(10), seen
    assert {b"m0", b"m1", b"m2"} <= set(seen)
