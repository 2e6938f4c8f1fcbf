"""``txmq send`` and ``txmq consume`` as subprocesses against a real broker."""

from __future__ import annotations

import json
import subprocess

from tests.client.broker import BrokerProcess
from tests.conftest import PYTHON, subprocess_env


def txmq(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "txmq", *args, "--endpoints", broker.namesrv],
        env=subprocess_env(broker.home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_send_then_consume(broker: BrokerProcess, unique: str) -> None:
    sent = txmq(
        broker, "send", "--topic", unique, "--body", "hello", "--tags", "greeting", "--count", "3", "--json"
    )
    assert sent.returncode == 0, sent.stderr
    ids = [json.loads(line)["message_id"] for line in sent.stdout.splitlines()]
    assert len(ids) == 3
    got = txmq(broker, "consume", "--topic", unique, "--group", f"cli{unique}", "--from-beginning",
               "--count", "3", "--timeout", "5s", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    assert sorted(r["message_id"] for r in rows) == sorted(ids)
    assert {r["body"] for r in rows} == {"hello"}


def test_send_rejects_bad_input_with_one_line(broker: BrokerProcess) -> None:
    bad = txmq(broker, "send", "--topic", "bad topic!", "--body", "x")
    assert bad.returncode != 0
    assert bad.stderr.strip().startswith("error:")
    assert len(bad.stderr.strip().splitlines()) == 1
