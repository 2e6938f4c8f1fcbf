"""ali-ons 3.12.0 (npm, a pure-JavaScript RocketMQ 4.x client) against ``txmq broker`` via its name server:
normal, ordered-by-sharding-key and delay-level sends, a push consumer, and a retry through
CONSUMER_SEND_MSG_BACK and ``%RETRY%<group>``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.remoting_support import broker_process
from tests.interop.node_support import NODE_DIR, node_with

pytestmark = pytest.mark.interop


def _installed() -> Path:
    return node_with("ali-ons", "ali-ons")


def test_ali_ons_produces_and_consumes(tmp_path: Path) -> None:
    node = _installed()
    with broker_process(tmp_path, "--delay-levels", "200ms 300ms 400ms 500ms") as broker:
        done = subprocess.run(
            [str(node), "interop.js", broker.namesrv_addr, "OnsTopic"],
            cwd=NODE_DIR, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    bodies = [m["body"] for m in result["received"]]
    assert sorted(bodies) == sorted(
        ["normal-0", "normal-1", "retry-me", "retry-me", "ordered-0", "ordered-1", "ordered-2", "delayed"]
    )
    ordered = [m for m in result["received"] if m["body"].startswith("ordered-")]
    assert [m["body"] for m in ordered] == ["ordered-0", "ordered-1", "ordered-2"]
    assert len({m["queueId"] for m in ordered}) == 1
    retried = [m for m in result["received"] if m["body"] == "retry-me"]
    assert [m["reconsumeTimes"] for m in retried] == [0, 1]
    assert next(m for m in result["received"] if m["body"] == "delayed")["tags"] == "TagD"


def test_a_body_ali_ons_compressed_reaches_every_consumer_as_sent(tmp_path: Path) -> None:
    """ali-ons deflates a body over 4 KiB and sets COMPRESSED in the send header's sysFlag. The broker
    dropped the flag and stored the deflated bytes as the body: ali-ons' own consumer and the official
    RocketMQ 5 client over gRPC both got zlib bytes instead of the text sent. An Apache broker keeps the
    flag (4.x clients inflate) and its proxy inflates for gRPC clients."""
    from tests.integration.grpc_harness import Clients, official_client

    node = _installed()
    topic = "OnsDeflated"
    with broker_process(tmp_path) as broker:
        done = subprocess.run(
            [str(node), "compressed.js", broker.namesrv_addr, topic],
            cwd=NODE_DIR, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["outcome"] == "ok", result["outcome"]
        sent = result["sent"]
        assert len(sent) > 4096 and result["received"] == [sent]  # ali-ons' consumer (remoting)

        clients = Clients(official_client(tmp_path / "client-home"), f"{broker.host}:{broker.grpc_port}")
        try:
            consumer = clients.simple("GrpcDeflated", topic, await_s=1)
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while not got and time.monotonic() < deadline:
                got = [m.body for m in consumer.receive(32, 30)]
        finally:
            clients.close()
    assert got == [sent.encode()]  # the official client over gRPC
