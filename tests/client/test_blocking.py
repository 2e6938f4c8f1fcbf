"""The blocking clients from plain threads against a real broker."""

from __future__ import annotations

import time

from tests.client.broker import BrokerProcess
from txmq.client import LocalTransactionState, Message
from txmq.client.blocking import (
    BlockingProducer,
    BlockingPullConsumer,
    BlockingTransactionProducer,
    ConsumeFrom,
)


class Commit:
    def execute_local_transaction(self, msg: object, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def test_blocking_send_transaction_and_pull(broker: BrokerProcess, unique: str) -> None:
    with BlockingProducer(broker.namesrv) as producer:
        plain = producer.send(Message(unique, b"plain"))
        batch = producer.send_batch([Message(unique, b"b1"), Message(unique, b"b2")])
    with BlockingTransactionProducer(f"tx{unique}", Commit(), broker.namesrv) as tx_producer:
        half, state = tx_producer.send_message_in_transaction(Message(unique, b"tx", transactional=True))
    assert state is LocalTransactionState.COMMIT_MESSAGE and half.transaction_id
    expected = {plain.message_id, half.message_id, *(r.message_id for r in batch)}
    got: set[str] = set()
    with BlockingPullConsumer(
        f"g{unique}", broker.namesrv, consume_from=ConsumeFrom.FIRST_OFFSET
    ) as consumer:
        consumer.subscribe(unique)
        deadline = time.monotonic() + 60
        while got != expected and time.monotonic() < deadline:
            got |= {m.message_id for m in consumer.poll(timeout_s=0.5)}
        consumer.commit()
    assert got == expected
