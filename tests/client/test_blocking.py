"""The blocking clients from plain threads against a real broker."""

from __future__ import annotations

import time

from tests.client.broker import BrokerProcess
from txmq.client import ConsumeResult, LocalTransactionState, Message, MessageView
from txmq.client.blocking import (
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
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


def test_blocking_pull_consumer_has_the_async_api(broker: BrokerProcess, unique: str) -> None:
    """docs/sdk/grpc.md promises the blocking classes take the same calls as the async ones: the
    documented PullConsumer example (queues, assign, seek_to_beginning, poll, commit) runs as written."""
    with BlockingProducer(broker.namesrv) as producer:
        sent = [producer.send(Message(unique, f"m{i}".encode())) for i in range(3)]
    got: list[bytes] = []
    with BlockingPullConsumer(f"g{unique}", broker.namesrv) as puller:
        queues = puller.queues(unique)
        puller.assign(queues)
        assert puller.assignment() == queues
        puller.seek_to_beginning()
        deadline = time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            got += [m.body for m in puller.poll(timeout_s=0.5, max_messages=1)]
        puller.commit()
        first = sent[0].queue
        assert puller.committed(first) == puller.position(first) > 0
        puller.seek(first, 0)
        assert puller.pull(first, max_messages=1)[0].body == b"m0"
        puller.seek_to_end([first])
        assert puller.pull(first) == []
        puller.seek_to_timestamp(0)
        assert puller.position(first) == 0
    assert sorted(got) == [b"m0", b"m1", b"m2"]


def test_blocking_push_consumer_has_the_async_api(broker: BrokerProcess, unique: str) -> None:
    """register_listener, rebalance and assigned_queues, as docs/sdk/consumers.md lists for PushConsumer."""
    got: list[bytes] = []

    def on_messages(msgs: list[MessageView]) -> ConsumeResult:
        got.extend(m.body for m in msgs)
        return ConsumeResult.SUCCESS

    with BlockingProducer(broker.namesrv) as producer:
        producer.send(Message(unique, b"one"))
    consumer = BlockingPushConsumer(f"g{unique}", broker.namesrv, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(unique)
    consumer.register_listener(on_messages)
    with consumer:
        consumer.rebalance()
        assert unique in {mq.topic for mq in consumer.assigned_queues}
        deadline = time.monotonic() + 60
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
    assert got == [b"one"]
