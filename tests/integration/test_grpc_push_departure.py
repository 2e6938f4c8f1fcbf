"""A PushConsumer that goes away mid-listener, with the official client: the broker renewed its lease
(60 s, auto_renew) and kept renewing it until the lease ran out, so another consumer of the group got
the message a minute later. Apache's proxy cuts a departed client's leases to 1 s
(DefaultReceiptHandleManager.clearGroup): the message is redelivered in seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from ..conftest import PYTHON, subprocess_env
from .grpc_harness import BrokerProcess, Clients

# the lease before the cut is 60 s; a redelivery within this proves the cut (2 s grace + 1 s + polls)
REDELIVERED_WITHIN_S = 20.0

_PUSH_CHILD = """
import sys, time
import rocketmq

class Stuck(rocketmq.MessageListener):
    def consume(self, message):
        print("CONSUMING", message.body.decode(), flush=True)
        time.sleep(600)
        return rocketmq.ConsumeResult.SUCCESS

endpoint, group, topic = sys.argv[1:4]
config = rocketmq.ClientConfiguration(endpoint, rocketmq.Credentials(), request_timeout=5)
consumer = rocketmq.PushConsumer(config, group, Stuck(), {topic: rocketmq.FilterExpression("*")})
consumer.startup()
print("STARTED", flush=True)
time.sleep(600)
"""


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _send(rmq: Any, clients: Clients, topic: str, body: bytes) -> None:
    message = rmq.Message()
    message.topic = topic
    message.body = body
    clients.producer(topic).send(message)


def _first_delivery(clients: Clients, group: str, topic: str, timeout_s: float) -> tuple[list[bytes], float]:
    """What another consumer of ``group`` receives first, and after how long (or nothing in time)."""
    consumer = clients.simple(group, topic, await_s=2)
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        got = consumer.receive(32, 20)
        if got:
            for message in got:
                consumer.ack(message)
            return [m.body for m in got], time.monotonic() - started
    return [], time.monotonic() - started


def _receive_auto_renewed(stub: Any, metadata: list[tuple[str, str]], group: str, topic: str) -> list[bytes]:
    """Heartbeat as a PushConsumer of ``group``, then one auto-renew receive of one message of ``topic``
    (what the official PushConsumer sends); the bodies received."""
    from rocketmq.grpc_protocol import definition_pb2 as d  # type: ignore[import-untyped]
    from rocketmq.grpc_protocol import service_pb2 as s  # type: ignore[import-untyped]

    heartbeat = s.HeartbeatRequest(group=d.Resource(name=group), client_type=d.PUSH_CONSUMER)
    assert stub.Heartbeat(heartbeat, metadata=metadata, timeout=10).status.code == 20000
    request = s.ReceiveMessageRequest(
        group=d.Resource(name=group),
        message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=-1),
        filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
        batch_size=1,
        auto_renew=True,
    )
    request.long_polling_timeout.FromSeconds(5)
    return [r.message.body for r in stub.ReceiveMessage(request, metadata=metadata, timeout=15)
            if r.HasField("message")]  # fmt: skip


def test_a_killed_push_consumers_message_goes_to_another_consumer_in_seconds(
    rmq: Any, clients: Clients, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic, group = _name("dep"), _name("g")
    broker.admin("topic.create", {"name": topic, "queues": 1})
    child = subprocess.Popen(
        [PYTHON, "-c", _PUSH_CHILD, broker.endpoint, group, topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=subprocess_env(tmp_path),
        start_new_session=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "STARTED"
        _send(rmq, clients, topic, b"long job")
        line = ""
        deadline = time.monotonic() + 60
        while not line.startswith("CONSUMING") and time.monotonic() < deadline:
            line = child.stdout.readline()
        assert line.split() == ["CONSUMING", "long", "job"], line
        time.sleep(1.0)  # its lease is renewed by now (a receive leases before the listener runs)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        bodies, after_s = _first_delivery(clients, group, topic, REDELIVERED_WITHIN_S)
        assert bodies == [b"long job"], f"not redelivered within {after_s:.1f} s of the kill"
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


def test_a_client_that_ends_its_session_has_its_messages_redelivered_in_seconds(
    rmq: Any, clients: Clients, broker: BrokerProcess
) -> None:
    """NotifyClientTermination while a message it received with auto_renew is unacked (the official
    Python client finishes its listeners first; another client may not): cut at once, no grace."""
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as d  # type: ignore[import-untyped]
    from rocketmq.grpc_protocol import service_pb2 as s  # type: ignore[import-untyped]
    from rocketmq.grpc_protocol import service_pb2_grpc as sg  # type: ignore[import-untyped]

    topic, group = _name("term"), _name("g")
    broker.admin("topic.create", {"name": topic, "queues": 1})
    _send(rmq, clients, topic, b"half done")
    metadata = [("x-mq-client-id", _name("leaver")), ("x-mq-protocol", "v2")]
    with grpc.insecure_channel(broker.endpoint) as channel:
        stub = sg.MessagingServiceStub(channel)
        got = _receive_auto_renewed(stub, metadata, group, topic)
        assert got == [b"half done"]
        ended = stub.NotifyClientTermination(
            s.NotifyClientTerminationRequest(group=d.Resource(name=group)), metadata=metadata, timeout=10
        )
        assert ended.status.code == 20000
    bodies, after_s = _first_delivery(clients, group, topic, REDELIVERED_WITHIN_S)
    assert bodies == [b"half done"], f"not redelivered within {after_s:.1f} s of the termination"


def test_a_clean_broker_restart_hands_auto_renewed_messages_out_again_in_seconds(
    rmq: Any, clients: Clients, broker: BrokerProcess
) -> None:
    """A clean stop cuts auto-renewed leases to 1 s before it saves them, as the proxy's shutdown does
    (clearAllHandle): nobody renews them after the restart, and renewed leases grow to an hour. txmq
    saved the lease as it stood (here the first 60 s), so the message waited for it after the restart."""
    import grpc
    from rocketmq.grpc_protocol import service_pb2_grpc as sg  # type: ignore[import-untyped]

    topic, group = _name("restart"), _name("g")
    broker.admin("topic.create", {"name": topic, "queues": 1})
    _send(rmq, clients, topic, b"in progress")
    metadata = [("x-mq-client-id", _name("worker")), ("x-mq-protocol", "v2")]
    with grpc.insecure_channel(broker.endpoint) as channel:
        got = _receive_auto_renewed(sg.MessagingServiceStub(channel), metadata, group, topic)
        assert got == [b"in progress"]
        broker.restart()  # SIGTERM: a clean stop, the client still registered
    bodies, after_s = _first_delivery(clients, group, topic, REDELIVERED_WITHIN_S)
    assert bodies == [b"in progress"], f"not redelivered within {after_s:.1f} s of the restart"
