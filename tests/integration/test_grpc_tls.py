"""TLS on the gRPC door, against ``txmq broker`` subprocesses.

RocketMQ 5's Java client connects with TLS by default and trusts any certificate; the Python and Node
clients connect in plaintext. The broker's default (``--grpc-tls permissive``) takes both on one port,
as the Apache proxy does; ``on`` takes TLS only, ``off`` plaintext only. The official Python client is
driven over TLS in a child process (grpc reads its trusted roots from the environment at start-up).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.conftest import subprocess_env
from txmq.protocol.grpc import pb
from txmq.server.tls import self_signed

from .grpc_harness import BrokerProcess


def _certificate(broker: BrokerProcess) -> bytes:
    """The broker's certificate; a stranger's when it made none (TLS off: the handshake fails anyway)."""
    path = broker.data_dir / "tls" / "broker.crt"
    return path.read_bytes() if path.exists() else self_signed("127.0.0.1").certificate_pem


async def _route(broker: BrokerProcess, *, secure: bool, topic: str = "TlsRoute") -> tuple[int, int]:
    """QueryRoute over a TLS or a plaintext channel: (status code, the port routes name)."""
    target = f"127.0.0.1:{broker.port}"
    if secure:
        credentials = grpc.ssl_channel_credentials(root_certificates=_certificate(broker))
        channel = grpc.aio.secure_channel(target, credentials)
    else:
        channel = grpc.aio.insecure_channel(target)
    async with channel:
        stub = pb.MessagingServiceStub(channel)
        request = pb.service.QueryRouteRequest(topic=pb.Resource(name=topic))
        reply = await stub.QueryRoute(request, metadata=(("x-mq-client-id", "tls-test"),), timeout=10)
    return reply.status.code, reply.message_queues[0].broker.endpoints.addresses[0].port


async def _send(broker: BrokerProcess, body: bytes, *, secure: bool) -> int:
    target = f"127.0.0.1:{broker.port}"
    options = [("grpc.max_send_message_length", 8 << 20)]
    if secure:
        credentials = grpc.ssl_channel_credentials(root_certificates=_certificate(broker))
        channel = grpc.aio.secure_channel(target, credentials, options=options)
    else:
        channel = grpc.aio.insecure_channel(target, options=options)
    async with channel:
        stub = pb.MessagingServiceStub(channel)
        message = pb.Message(
            topic=pb.Resource(name="TlsBig"),
            body=body,
            system_properties=pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), body_encoding=1),
        )
        request = pb.service.SendMessageRequest(messages=[message])
        reply = await stub.SendMessage(request, metadata=(("x-mq-client-id", "tls-test"),), timeout=30)
    return int(reply.status.code)


@pytest.fixture(scope="module")
def permissive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("permissive"))  # the default mode
    process.start()
    yield process
    process.stop()


def test_permissive_port_takes_tls_and_plaintext_clients_and_routes_name_it(
    permissive: BrokerProcess,
) -> None:
    assert asyncio.run(_route(permissive, secure=True)) == (20000, permissive.port)
    assert asyncio.run(_route(permissive, secure=False)) == (20000, permissive.port)


def test_large_messages_cross_the_relay_whole_both_ways(permissive: BrokerProcess) -> None:
    body = os.urandom(4 * 1024 * 1024 - 1024)  # near the 4 MiB limit: many relay reads and writes

    async def both() -> list[int]:
        return list(await asyncio.gather(*(_send(permissive, body, secure=s) for s in (True, False, True))))

    assert asyncio.run(both()) == [20000, 20000, 20000]


def test_a_restart_presents_the_same_certificate(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path)
    broker.start()
    try:
        first = _certificate(broker)
        broker.restart()
        assert _certificate(broker) == first
        assert asyncio.run(_route(broker, secure=True))[0] == 20000
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("mode", "takes_tls", "takes_plaintext"), [("on", True, False), ("off", False, True)]
)
def test_tls_only_and_plaintext_only_ports(
    tmp_path: Path, mode: str, takes_tls: bool, takes_plaintext: bool
) -> None:
    broker = BrokerProcess(tmp_path, extra_args=["--grpc-tls", mode])
    broker.start()
    try:
        assert (broker.data_dir / "tls").exists() is takes_tls  # nothing made when TLS is off
        for secure, takes in ((True, takes_tls), (False, takes_plaintext)):
            if takes:
                assert asyncio.run(_route(broker, secure=secure))[0] == 20000
            else:
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    asyncio.run(_route(broker, secure=secure))
                assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    finally:
        broker.stop()


def test_a_bad_tls_flag_fails_with_a_one_line_reason(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, extra_args=["--tls-cert", str(tmp_path / "only-a-cert.pem")])
    with pytest.raises(RuntimeError, match="both --tls-cert and --tls-key"):
        broker.start()


OFFICIAL_OVER_TLS = textwrap.dedent(
    """
    import json, sys, time
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    endpoint, topic, group = sys.argv[1:4]
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
    producer = Producer(config, (topic,), tls_enable=True)
    producer.startup()
    sent = []
    for i in range(3):
        message = Message()
        message.topic = topic
        message.body = f"tls-{i}".encode()
        sent.append(producer.send(message).message_id)
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, 2, tls_enable=True)
    consumer.startup()
    got, deadline = {}, time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        for message in consumer.receive(16, 15) or []:
            consumer.ack(message)
            got[message.message_id] = message.body.decode()
    producer.shutdown()
    consumer.shutdown()
    print(json.dumps({"sent": sent, "got": got}))
    """
)


def test_the_official_client_over_tls(permissive: BrokerProcess, tmp_path: Path) -> None:
    roots = tmp_path / "roots.pem"
    roots.write_bytes(_certificate(permissive))  # the client trusts the default roots only
    env = subprocess_env(tmp_path)
    env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(roots)
    topic, group = f"tls-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-c", OFFICIAL_OVER_TLS, permissive.endpoint, topic, group],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(result["got"]) == sorted(result["sent"])
    assert sorted(result["got"].values()) == ["tls-0", "tls-1", "tls-2"]
