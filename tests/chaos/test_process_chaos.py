"""SIGKILL rounds under load through a fault proxy: nothing acknowledged is lost, nothing rolled back
or undecided becomes visible, every queue keeps its order. ``TXMQ_CHAOS_ROUNDS`` / ``TXMQ_CHAOS_SEED``
(or ``make chaos``) run longer."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosRun

pytestmark = [pytest.mark.slow, pytest.mark.interop]


async def test_sigkill_rounds_lose_nothing_acknowledged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = int(os.environ.get("TXMQ_CHAOS_SEED", random.randrange(2**31)))
    rounds = int(os.environ.get("TXMQ_CHAOS_ROUNDS", "3"))
    figures = await ChaosRun(tmp_path, seed, rounds).run()
    with capsys.disabled():
        print("\n" + figures.line())
    checker = figures.checker
    assert checker is not None
    assert figures.kills == rounds
    assert figures.proxy_connections > 0  # routes named the proxy (remoting_advertised_addr), not the broker
    assert figures.acknowledged_by_client["sdk-remoting"] > 0
    assert figures.acknowledged_by_client["sdk-tx"] > 0
    assert figures.acknowledged_by_client["official-grpc"] > 0
    assert checker.ok and figures.lost == 0 and figures.wrongly_visible == 0, (
        figures.line(),
        checker.examples,
    )
