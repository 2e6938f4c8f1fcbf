"""rocketmq-client-nodejs 1.0.8 (npm, the official RocketMQ 5 Node client, unmodified) against the gRPC
port of ``txmq broker``: a Producer sends tagged, keyed messages, a transaction committed by the client and
one left open and resolved by check-back, and a SimpleConsumer receives and acks them all; once in
plaintext and once with ``sslEnabled: true`` on the same (permissive) port.

The client calls ``ChannelCredentials.createSsl()`` with no roots, so grpc-js trusts its bundled roots or the
file named by ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``; ``NODE_EXTRA_CA_CERTS`` is not consulted (tried: the
broker's self-signed certificate is then refused)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.grpc_harness import BrokerProcess
from tests.interop.node_support import NODE_DIR, node_with

PACKAGE = "rocketmq-client-nodejs"
pytestmark = pytest.mark.interop


def _installed() -> Path:
    return node_with(PACKAGE, PACKAGE)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    _installed()  # skip before starting a broker
    process = BrokerProcess(
        tmp_path_factory.mktemp("node5"),
        extra_args=["--transaction-timeout", "1s", "--transaction-check-interval", "1s"],
    )  # --grpc-tls permissive is the default: one port for both runs
    process.start()
    yield process
    process.stop()


def _run(broker: BrokerProcess, home: Path, *, ssl: bool, trust: bool = True) -> tuple[int, dict[str, Any]]:
    """Runs ``grpc5.js`` with its own HOME (the client logs there); returns its exit code and JSON line."""
    env = dict(os.environ, HOME=str(home))
    env.pop("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", None)
    if trust:
        env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(broker.data_dir / "tls" / "broker.crt")
    suffix = uuid.uuid4().hex[:8]
    done = subprocess.run(
        [str(_installed()), "grpc5.js", broker.endpoint, f"Node5-{suffix}", f"GID-{suffix}",
         "1" if ssl else "0", "1"],
        cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    return done.returncode, json.loads(lines[-1])


@pytest.mark.parametrize("ssl", [False, True], ids=["plaintext", "tls"])
def test_node_client_sends_transacts_receives_and_acks(
    broker: BrokerProcess, tmp_path: Path, ssl: bool
) -> None:
    code, result = _run(broker, tmp_path, ssl=ssl)
    assert code == 0 and result["outcome"] == "ok", result
    assert result["errors"] == []

    def fields(messages: list[dict[str, Any]]) -> list[tuple[str, str, tuple[str, ...], str]]:
        return sorted((m["body"], m["tag"], tuple(m["keys"]), m["messageId"]) for m in messages)

    assert fields(result["received"]) == fields(result["sent"])
    assert sorted(m["body"] for m in result["sent"]) == [
        "node-0", "node-1", "node-2", "tx-checked", "tx-committed",
    ]  # fmt: skip
    transactional = {m["messageId"] for m in result["sent"] if m["body"].startswith("tx-")}
    assert result["orphanId"] in result["checked"]  # resolved by check-back, not by the client
    # the committed one may be asked about too if its commit lags the 1 s transaction timeout under load
    assert set(result["checked"]) <= transactional


def test_node_tls_client_refuses_the_untrusted_certificate(broker: BrokerProcess, tmp_path: Path) -> None:
    """The TLS run above really negotiates TLS: without the certificate trusted, the client cannot start."""
    code, result = _run(broker, tmp_path, ssl=True, trust=False)
    assert code == 1 and result["outcome"] == "error"
    assert any("self-signed certificate" in error for error in result["errors"]), result["errors"]
