"""Interoperability with the official ``rocketmq`` client (rocketmq-python-client 5.1.2, gRPC).

Messages it sends are consumed by txmq's consumers over both transports, and messages txmq's producers
send over both transports are consumed by it; its transaction checker and txmq's commit each other's
half messages through the same broker. The official client is synchronous, so txmq's blocking
clients are used on this side.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.client.broker import BrokerProcess
from tests.integration.grpc_harness import Clients, official_client, receive_all
from txmq.client import (
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingSimpleConsumer,
    ConsumeFrom,
    ConsumeResult,
    Message,
    MessageView,
)


@pytest.fixture(scope="module")
def rmq(broker: BrokerProcess) -> Any:
    return official_client(broker.home)


@pytest.fixture
def clients(rmq: Any, broker: BrokerProcess) -> Iterator[Clients]:
    made = Clients(rmq, broker.grpc)
    yield made
    made.close()


def official_message(rmq: Any, topic: str, body: bytes, tag: str, key: str) -> Any:
    message = rmq.Message()
    message.topic, message.body, message.tag, message.keys = topic, body, tag, key
    message.add_property("origin", "official")
    return message


def pull_all(consumer: BlockingPullConsumer, count: int) -> list[MessageView]:
    got: list[MessageView] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(timeout_s=0.5)
    return got


def test_official_producer_to_txmq_consumers(
    rmq: Any, clients: Clients, broker: BrokerProcess, unique: str
) -> None:
    producer = clients.producer(unique)
    sent = {
        producer.send(official_message(rmq, unique, f"o{i}".encode(), "tagA", f"key{i}")).message_id
        for i in range(3)
    }
    got: list[MessageView] = []
    with BlockingSimpleConsumer(f"s{unique}", broker.grpc, subscriptions={unique: "*"}) as simple:
        deadline = time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            for message in simple.receive(16, 30, wait_s=1):
                got.append(message)
                simple.ack(message)
    assert {m.message_id for m in got} == sent
    assert all(m.tags == "tagA" and m.properties.get("origin") == "official" for m in got)
    for transport, endpoints in (("remoting", broker.namesrv), ("grpc", broker.grpc)):
        with BlockingPullConsumer(
            f"p{transport}{unique}", endpoints, transport=transport, consume_from=ConsumeFrom.FIRST_OFFSET
        ) as puller:
            puller.subscribe(unique)
            pulled = pull_all(puller, 3)
        assert {m.message_id for m in pulled} == sent, transport
        assert {m.keys for m in pulled} == {("key0",), ("key1",), ("key2",)}


@pytest.mark.parametrize("transport", ["remoting", "grpc"])
def test_txmq_producer_to_official_consumer(
    clients: Clients, broker: BrokerProcess, unique: str, transport: str
) -> None:
    topic = f"{unique}{transport}"
    endpoints = broker.namesrv if transport == "remoting" else broker.grpc
    with BlockingProducer(endpoints, transport=transport) as producer:
        sent = {
            producer.send(
                Message(topic, f"x{i}".encode(), tags="tagB", keys=(f"k{i}",), properties={"n": str(i)})
            ).message_id
            for i in range(2)
        }
        sent |= {r.message_id for r in producer.send_batch([Message(topic, b"b0"), Message(topic, b"b1")])}
    consumer = clients.simple(f"o{topic}", topic)
    got = receive_all(consumer, 4, timeout_s=60)
    assert {m.message_id for m in got} == sent
    assert not any(m.corrupted for m in got)  # body digests match
    singles = [m for m in got if m.body.startswith(b"x")]
    assert {(m.tag, m.properties["n"]) for m in singles} == {("tagB", "0"), ("tagB", "1")}


def test_official_producer_to_txmq_push_consumer_over_grpc(
    rmq: Any, clients: Clients, broker: BrokerProcess, unique: str
) -> None:
    producer = clients.producer(unique)
    sent = {producer.send(official_message(rmq, unique, b"p", "t", "k")).message_id for _ in range(3)}
    seen: set[str] = set()
    arrived = threading.Event()

    def listener(messages: list[MessageView]) -> ConsumeResult:
        seen.update(m.message_id for m in messages)
        if seen >= sent:
            arrived.set()
        return ConsumeResult.SUCCESS

    with BlockingPushConsumer(
        f"push{unique}", broker.grpc, transport="grpc", listener=listener, subscriptions={unique: "*"}
    ):
        assert arrived.wait(10), (seen, sent)
