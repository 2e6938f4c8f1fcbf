"""Runs inside its own virtualenv with the PyPI ``rocketmq`` 0.4.4 wheel (the bundled C++ client 2.1.8),
which cannot share one with ``rocketmq-python-client``. Usage: python rocketmq044_script.py NAMESRV TOPIC.
Starts an orderly push consumer, sends a batch, ordered and delayed messages, prints one JSON line."""

from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer  # type: ignore[import-not-found]


def message(topic: str, body: str, tags: str, delay: int = 0) -> Message:
    msg = Message(topic)
    msg.set_tags(tags)
    msg.set_keys(body)
    msg.set_body(body)
    if delay:
        msg.set_delay_time_level(delay)
    return msg


def main(namesrv: str, topic: str) -> int:
    received: list[dict[str, object]] = []
    lock = threading.Lock()
    expected = 10  # batch of 5, 3 ordered, 1 delayed, 1 normal

    def on_message(msg: object) -> None:
        with lock:
            received.append({"body": msg.body.decode(), "queueId": msg.queue_id, "tags": msg.tags.decode()})  # type: ignore[attr-defined]

    consumer = PushConsumer("CID_TXMQ_CPP", orderly=True)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message)
    consumer.start()
    time.sleep(3)  # let the consumer rebalance before anything is sent (it starts from the queue ends)
    producer = Producer("PID_TXMQ_CPP")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    statuses = []
    statuses.append(producer.send_batch([message(topic, f"batch-{i}", "TagB") for i in range(5)]).status)
    for i in range(3):
        statuses.append(producer.send_orderly(message(topic, f"ordered-{i}", "TagO"), 7).status)
    statuses.append(producer.send_sync(message(topic, "delayed", "TagD", delay=2)).status)
    statuses.append(producer.send_sync(message(topic, "normal", "TagA")).status)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and len(received) < expected:
        time.sleep(0.1)
    producer.shutdown()
    consumer.shutdown()
    print(json.dumps({"statuses": [int(s) for s in statuses], "received": received}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
