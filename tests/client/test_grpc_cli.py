"""``txmq send`` / ``txmq consume`` with ``--transport grpc``, as subprocesses against a real broker."""

from __future__ import annotations

import json
import subprocess

from tests.client.broker import BrokerProcess
from tests.conftest import PYTHON, free_port, subprocess_env


def txmq(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "txmq", *args], env=subprocess_env(broker.home), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_send_over_grpc_consume_over_both(broker: BrokerProcess, unique: str) -> None:
    sent = txmq(
        broker, "send", "--endpoints", broker.grpc, "--transport", "grpc", "--topic", unique,
        "--body", "hi", "--tags", "t", "--keys", "k1 k2", "--message-group", "g", "--count", "2", "--json",
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    ids = sorted(json.loads(line)["message_id"] for line in sent.stdout.splitlines())
    assert len(ids) == 2
    for transport, endpoints in (("grpc", broker.grpc), ("remoting", broker.namesrv)):
        got = txmq(
            broker, "consume", "--endpoints", endpoints, "--transport", transport, "--topic", unique,
            "--group", f"c{transport}{unique}", "--from-beginning", "--count", "2", "--timeout", "5s",
            "--json",
        )  # fmt: skip
        assert got.returncode == 0, got.stderr
        rows = [json.loads(line) for line in got.stdout.splitlines()]
        assert sorted(r["message_id"] for r in rows) == ids, transport
        assert {(r["body"], r["tags"], tuple(r["keys"])) for r in rows} == {("hi", "t", ("k1", "k2"))}


def test_send_fails_with_one_line_when_nothing_listens(broker: BrokerProcess, unique: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    bad = txmq(broker, "send", "--endpoints", dead, "--transport", "grpc", "--topic", unique, "--body", "x")
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("error:"), bad.stderr
    wrong = txmq(broker, "send", "--transport", "carrier-pigeon", "--topic", unique, "--body", "x")
    assert wrong.returncode != 0 and "--transport" in wrong.stderr
