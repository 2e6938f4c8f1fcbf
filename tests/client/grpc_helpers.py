"""Helpers for the SDK's gRPC tests: typed topics through the admin CLI, draining a SimpleConsumer."""

from __future__ import annotations

import subprocess
import time

from tests.client.broker import BrokerProcess
from tests.conftest import PYTHON, subprocess_env
from txmq.client import MessageView, SimpleConsumer


def create_typed_topic(broker: BrokerProcess, name: str, message_type: str, queues: int = 2) -> None:
    """``txmq topic create`` on the broker's gRPC admin door (FIFO topics cannot be auto-created)."""
    done = subprocess.run(
        [PYTHON, "-m", "txmq", "topic", "create", name, "--queues", str(queues), "--type", message_type,
         "--endpoint", broker.grpc],
        env=subprocess_env(broker.home), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


async def drain(consumer: SimpleConsumer, want: int, timeout_s: float = 10.0) -> list[MessageView]:
    """Receive and ack until ``want`` messages arrived (or the deadline: the caller's assert fails)."""
    got: list[MessageView] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        for message in await consumer.receive(32, 10, wait_s=1):
            got.append(message)
            await consumer.ack(message)
    return got
