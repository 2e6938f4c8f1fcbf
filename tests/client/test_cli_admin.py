"""The admin commands of DESIGN §6 (``txmq topic`` / ``txmq group``) as subprocesses against a real broker,
as an operator types them."""

from __future__ import annotations

import json
import subprocess

from tests.client.broker import BrokerProcess
from tests.conftest import PYTHON, subprocess_env


def txmq(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "txmq", *args, "--endpoint", broker.grpc],
        env=subprocess_env(broker.home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _topics(broker: BrokerProcess) -> set[str]:
    listed = txmq(broker, "topic", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {row["name"] for row in json.loads(listed.stdout)}


def test_reset_offset_of_a_mistyped_topic_fails_and_creates_nothing(
    broker: BrokerProcess, unique: str
) -> None:
    """It used to auto-create the mistyped topic (with the default queues) and report a reset of it."""
    created = txmq(broker, "topic", "create", unique, "--queues", "2")
    assert created.returncode == 0, created.stderr
    reset = txmq(broker, "group", "reset-offset", f"g{unique}", "--topic", f"{unique}-typo", "--to", "end")
    assert reset.returncode == 1, reset.stdout
    lines = reset.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "does not exist" in lines[0], reset.stderr
    assert f"{unique}-typo" not in _topics(broker)
    good = txmq(
        broker, "group", "reset-offset", f"g{unique}", "--topic", unique, "--to", "beginning", "--json"
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout) == {"0": 0, "1": 0}


def _one_line_error(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 1, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], result.stderr


def test_describing_an_unknown_group_fails_and_a_known_one_is_described(
    broker: BrokerProcess, unique: str
) -> None:
    """``group describe`` of a mistyped name printed an empty description and exited 0."""
    _one_line_error(txmq(broker, "group", "describe", f"nobody{unique}"), "is not known")
    assert txmq(broker, "topic", "create", unique, "--queues", "1").returncode == 0
    reset = txmq(broker, "group", "reset-offset", f"g{unique}", "--topic", unique, "--to", "end")
    assert reset.returncode == 0, reset.stderr
    described = txmq(broker, "group", "describe", f"g{unique}", "--json")
    assert described.returncode == 0, described.stderr
    assert [row["topic"] for row in json.loads(described.stdout)["queues"]] == [unique]


def test_tx_list_refuses_a_limit_below_one(broker: BrokerProcess) -> None:
    """``tx list --limit -1`` answered an empty list as if nothing were pending."""
    _one_line_error(txmq(broker, "tx", "list", "--limit", "0"), "limit must be at least 1")
    assert txmq(broker, "tx", "list", "--limit", "1", "--json").returncode == 0
