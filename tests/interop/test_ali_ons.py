"""ali-ons 3.12.0 (npm, a pure-JavaScript RocketMQ 4.x client) against ``txmq broker`` via its name server:
normal, ordered-by-sharding-key and delay-level sends, a push consumer, and a retry through
CONSUMER_SEND_MSG_BACK and ``%RETRY%<group>``."""

from __future__ import annotations

import json
import subprocess
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
