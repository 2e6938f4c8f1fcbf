"""Smoke runs of the benchmark harness: tiny durations, the in-process driver and every peer that is up.

Figures are never asserted (the machine is shared); counts, statuses and clean teardown are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

import pytest
from benchmarks.harness import STANDARD_WORKLOADS, Driver, Workload, make_driver, registry, run_workload
from benchmarks.harness.driver import Producer
from benchmarks.harness.drivers.memory import MemoryDriver
from benchmarks.harness.runner import SlotOutcome, drive_slot
from typer.testing import CliRunner

TINY = 0.3


def _tiny(name: str, preload: int = 400) -> Workload:
    return STANDARD_WORKLOADS[name].scaled(duration_s=TINY, preload_messages=preload)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _assert_ok(result: dict[str, object]) -> None:
    # Not "throughput > 0": on a loaded host a tiny window can close before any ack lands in it.
    # Callers check the counts (acked, consumed), which do not depend on timing.
    assert result["status"] == "ok", result.get("reason")
    assert isinstance(result["throughput_msg_s"], float)
    assert result["throughput_msg_s"] >= 0


async def _check_produce(driver: Driver, name: str, workload: Workload | None = None) -> dict[str, object]:
    result = await run_workload(driver, workload or _tiny(name))
    _assert_ok(result)
    assert isinstance(result["acked_messages"], int)
    assert result["acked_messages"] > 0
    assert result["publish_latency"] is not None
    return result


async def _check_e2e(driver: Driver) -> None:
    result = await _check_produce(driver, "e2e-500")
    assert result["consumed_messages"] == result["acked_messages"]
    assert result["e2e_latency"] is not None


async def _check_consume(driver: Driver) -> None:
    # The consume workload drains its preload for at most duration_s and stops as soon as it is done:
    # a long duration is a give-up limit, not a wait (0.3 s drained 79 of 500 on a loaded host).
    result = await run_workload(
        driver, STANDARD_WORKLOADS["consume-256"].scaled(duration_s=60, preload_messages=500)
    )
    _assert_ok(result)
    assert result["consumed_messages"] == 500


async def test_memory_driver_runs_every_standard_workload() -> None:
    for name in STANDARD_WORKLOADS:
        result = await run_workload(MemoryDriver(), _tiny(name))
        _assert_ok(result)
        assert isinstance(result["acked_messages"], int)
        assert result["acked_messages"] > 0
        cpu = result["cpu"]
        assert isinstance(cpu, dict)
        assert cpu["server_pct"] is None  # no server process to measure
        if name == "e2e-500":
            assert result["consumed_messages"] == result["acked_messages"]


class _SlowFirstSend(MemoryDriver):
    """The memory driver whose first send is acked only after the measured window has closed: what a
    subprocess broker's first request (connection set-up) looks like on a heavily loaded host."""

    def __init__(self, stall_s: float) -> None:
        super().__init__()
        self._stall_s = stall_s

    async def producer(self, index: int) -> Producer:
        inner = await super().producer(index)
        stall = [self._stall_s]

        class Stalling:
            async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
                if stall:
                    await asyncio.sleep(stall.pop())
                await inner.send(queue, payloads)

            async def close(self) -> None:
                await inner.close()

        return Stalling()


async def test_a_warmup_request_acked_after_the_window_still_leaves_latency_samples() -> None:
    """Regression: the smoke tests saw ``publish_latency`` None under load, because the only request sent
    before the window ended was the one sent during warmup; every slot now sends at least one request
    inside the window."""
    workload = _tiny("e2e-500")
    stall_s = workload.warmup_s + workload.duration_s + 0.05  # the first ack lands after the deadline
    result = await run_workload(_SlowFirstSend(stall_s), workload)
    _assert_ok(result)
    assert result["publish_latency"] is not None
    assert result["e2e_latency"] is not None
    assert result["consumed_messages"] == result["acked_messages"]


class _SelfDriving(MemoryDriver):
    """The memory driver whose producers run their slots themselves, as txmq's producer workers do."""

    def __init__(self) -> None:
        super().__init__()
        self.slots_run = 0

    async def producer(self, index: int) -> Producer:
        inner = await super().producer(index)
        driver = self

        class SelfDriving:
            async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
                raise AssertionError("the runner must not relay requests to a self-driving producer")

            async def run_slot(
                self, first_queue: int, workload: Workload, measure_from: int, deadline: int, interval: int
            ) -> SlotOutcome:
                driver.slots_run += 1
                return await drive_slot(inner, workload, first_queue, measure_from, deadline, interval)

            async def close(self) -> None:
                await inner.close()

        return SelfDriving()


async def test_a_self_driving_producer_runs_its_slots_and_its_counts_are_merged() -> None:
    """txmq's producer workers run the runner's slot loop in their own process (no pipe round trip per
    request); what they count is merged as if the slot had run in the harness."""
    driver = _SelfDriving()
    workload = dataclasses.replace(_tiny("e2e-500"), producers=2, in_flight=2)
    result = await run_workload(driver, workload)
    _assert_ok(result)
    assert driver.slots_run == 4
    assert isinstance(result["acked_messages"], int)
    assert result["acked_messages"] > 0
    assert result["consumed_messages"] == result["acked_messages"]
    assert result["publish_latency"] is not None


async def test_unsupported_workload_is_reported_not_run() -> None:
    result = await run_workload(MemoryDriver(transactions=False), _tiny("tx-8"))
    assert result["status"] == "n/a"
    assert result["reason"] == "transactions disabled"


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
async def test_redis_streams_private_server() -> None:
    pytest.importorskip("redis", reason="the bench extra (redis-py) is not installed")
    driver = make_driver("redis-always")
    assert driver.describe().fsync_before_ack
    await _check_produce(driver, "single-1")
    await _check_produce(driver, "batch-100")
    await _check_produce(driver, "tx-8")
    await _check_e2e(driver)
    await _check_consume(driver)
    assert driver.server_pids() == []  # the private server was stopped


@pytest.mark.skipif(not _port_open(4222), reason="NATS is not listening on 127.0.0.1:4222")
async def test_nats_jetstream() -> None:
    pytest.importorskip("nats", reason="the bench extra (nats-py) is not installed")
    driver = make_driver("nats-file")
    assert not driver.describe().fsync_before_ack
    await _check_produce(driver, "batch-100")
    await _check_consume(driver)
    result = await run_workload(driver, _tiny("tx-8"))
    assert result["status"] == "n/a"


@pytest.mark.skipif(not _port_open(5672), reason="RabbitMQ is not listening on 127.0.0.1:5672")
async def test_rabbitmq_quorum() -> None:
    pytest.importorskip("aiormq", reason="the bench extra (aiormq) is not installed")
    driver = make_driver("rabbitmq-quorum")
    await _check_produce(driver, "tx-8")
    await _check_e2e(driver)
    await _check_consume(driver)


async def test_txmq_sync_private_broker() -> None:
    """The native door with sync flush: batches over 16 queues, transactions from producer processes,
    a consumer; one private broker per run, stopped afterwards."""
    driver = make_driver("txmq-sync")
    info = driver.describe()
    assert info.fsync_before_ack
    assert "remoting" in info.client
    await _check_produce(driver, "batch-100-q16")
    # 2 producer processes (not 8, to stay quick) and a consumer: committed transactions become visible
    two = dataclasses.replace(_tiny("tx-8"), name="tx-2", producers=2, consumers=1)
    result = await _check_produce(driver, "tx-2", two)
    assert result["consumed_messages"] == result["acked_messages"]
    await _check_consume(driver)
    assert driver.server_pids() == []  # the private broker was stopped


async def test_txmq_grpc_and_async_flush() -> None:
    grpc = make_driver("txmq-grpc")
    assert "gRPC" in grpc.describe().client
    await _check_e2e(grpc)  # sends and the offset-pull consumer over gRPC
    relaxed = make_driver("txmq-async")
    assert not relaxed.describe().fsync_before_ack
    await _check_produce(relaxed, "async-256")


def test_compare_cli_with_a_registered_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path the lead uses to add txmq: register a driver, then name it in --systems."""
    pytest.importorskip("matplotlib", reason="the bench extra (matplotlib) is not installed")
    import typer

    from txmq.cli.bench import register

    monkeypatch.setitem(registry._SYSTEMS, "memory", registry.SystemEntry("memory", "test", MemoryDriver))
    monkeypatch.setitem(
        registry._SYSTEMS, "memory-notx", registry.SystemEntry("memory-notx", "", lambda: MemoryDriver(False))
    )
    app = typer.Typer()
    register(app)
    args = ["bench", "compare", "--systems", "memory,memory-notx", "--workloads", "single-1,tx-8"]
    args += ["--duration", "0.2", "--rounds", "2", "--out", str(tmp_path), "--loop", "asyncio"]
    outcome = CliRunner().invoke(app, args)
    assert outcome.exit_code == 0, outcome.output
    document = json.loads((tmp_path / "compare.json").read_text())
    assert len(document["runs"]) == 2 * 2 * 2
    statuses = {(r["workload"], r["system"]): r["status"] for r in document["summary"]}
    assert statuses == {
        ("single-1", "memory"): "ok",
        ("single-1", "memory-notx"): "ok",
        ("tx-8", "memory"): "ok",
        ("tx-8", "memory-notx"): "n/a",
    }
    assert (tmp_path / "compare.png").exists()
    assert "ratios vs memory" in outcome.output
    again = CliRunner().invoke(app, ["bench", "report", str(tmp_path), "--baseline", "memory-notx"])
    assert again.exit_code == 0, again.output
    assert "ratios vs memory-notx" in again.output
    table = CliRunner().invoke(app, ["bench", "report", str(tmp_path), "--markdown"])
    assert table.exit_code == 0, table.output
    assert "| single-1 | memory | " in table.output
    assert "| tx-8 | memory-notx | n/a: transactions disabled |" in table.output


def test_compare_cli_rejects_unknown_names(tmp_path: Path) -> None:
    import typer

    from txmq.cli.bench import register

    app = typer.Typer()
    register(app)
    outcome = CliRunner().invoke(app, ["bench", "compare", "--systems", "nope", "--out", str(tmp_path)])
    assert outcome.exit_code != 0
    assert not (tmp_path / "compare.json").exists()
