"""kill -9 of the broker while the official client sends with sync flush: after a restart every
acknowledged message is received exactly once by a fresh consumer group."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from .grpc_harness import BrokerProcess, Clients, official_client

pytestmark = pytest.mark.slow


def _send_until_stopped(
    producer: object, rmq: object, topic: str, acked: list[str], stop: threading.Event
) -> None:
    sequence = 0
    while not stop.is_set():
        message = rmq.Message()  # type: ignore[attr-defined]
        message.topic = topic
        message.body = f"m{sequence}".encode() + b"x" * 1000
        sequence += 1
        try:
            receipt = producer.send(message)  # type: ignore[attr-defined]
        except Exception:
            time.sleep(0.05)
            continue
        acked.append(receipt.message_id)


def _receive_until_seen(consumer: Any, wanted: set[str], *, timeout_s: float) -> list[Any]:
    """Receive and ack until every wanted id arrived and a receive came back empty (or the timeout).

    Counting messages is not enough: sends the kill interrupted may be stored without their
    acknowledgement reaching the producer, and they are delivered too.
    """
    got: list[Any] = []
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        batch = consumer.receive(32, 20)
        for message in batch:
            got.append(message)
            seen.add(message.message_id)
            consumer.ack(message)
        if not batch and wanted <= seen:
            break
    return got


def test_kill9_loses_no_acknowledged_message(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, extra_args=["--flush", "sync"])
    broker.start()
    rmq = official_client(broker.home)
    rng = random.Random(7)
    all_acked: list[str] = []
    try:
        for round_number in range(3):
            clients = Clients(rmq, broker.endpoint)
            producer = clients.producer("kill9")
            acked: list[str] = []
            stop = threading.Event()
            sender = threading.Thread(target=_send_until_stopped, args=(producer, rmq, "kill9", acked, stop))
            sender.start()
            time.sleep(0.8 + rng.random())
            assert broker.proc is not None
            broker.proc.send_signal(signal.SIGKILL)
            broker.proc.wait()
            broker.proc = None
            stop.set()
            sender.join(timeout=30)
            clients.close()
            assert acked, f"round {round_number}: nothing was acknowledged before the kill"
            all_acked += acked
            broker.start()
        clients = Clients(rmq, broker.endpoint)
        consumer = clients.simple("fresh-group", "kill9", await_s=1)
        got = _receive_until_seen(consumer, set(all_acked), timeout_s=60)
        clients.close()
        counts = Counter(m.message_id for m in got)
        missing = [m for m in all_acked if m not in counts]
        assert missing == [], f"{len(missing)} acknowledged messages lost of {len(all_acked)}"
        duplicated = [m for m in all_acked if counts[m] > 1]
        assert duplicated == [], f"acknowledged messages delivered twice: {duplicated[:5]}"
    finally:
        broker.stop()
