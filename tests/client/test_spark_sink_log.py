"""The exactly-once sink's broker side without a JVM: each crash window converges by check-back.

A real broker subprocess (transaction timeout and check interval 500 ms); the executor and driver steps
of :mod:`txmq.spark.sink_log` are called directly, and "the driver died here" means the next step is
simply never called.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.broker import FAST_FLAGS, BrokerProcess
from tests.client.topic_reader import read_topic_async
from tests.conftest import PYTHON, free_port, subprocess_env
from txmq.cli.admin_client import call
from txmq.common.message import Message
from txmq.spark.sink_log import TaskResult, abort_epoch, finish_epoch, read_record, run_resolver, send_task
from txmq.spark.sink_plan import CommitPlan, SinkOptions
from txmq.testing.proxy import ConnectionPlan, Fault, FaultProxy, FaultSchedule


def _rows(topic: str, start: int, count: int) -> list[Message]:
    return [Message(topic, f"row-{i}".encode(), keys=(f"k{i}",)) for i in range(start, start + count)]


def _states(broker: BrokerProcess, result: TaskResult) -> set[str]:
    return {call(broker.grpc, "tx.show", {"id": h.transaction_id})["state"] for h in result.halves}


async def _bodies(broker: BrokerProcess, topic: str) -> list[bytes]:
    return sorted(m.body for m in await read_topic_async(broker.namesrv, topic))


async def _wait_states(broker: BrokerProcess, result: TaskResult, state: str) -> None:
    async def poll() -> None:
        for _ in range(200):
            if _states(broker, result) == {state}:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"halves of {result.token} never all {state}: {_states(broker, result)}")

    await poll()


async def test_commit_records_then_replay_is_rolled_back(broker: BrokerProcess, unique: str) -> None:
    options = SinkOptions(broker.namesrv, unique, f"s{unique}")
    first = await send_task(options, "0", 0, _rows(unique, 0, 5))
    assert await finish_epoch(options, "0", [first]) is CommitPlan.RECORD_AND_COMMIT
    replay = await send_task(options, "0", 0, _rows(unique, 0, 5))
    assert await finish_epoch(options, "0", [replay]) is CommitPlan.ROLLBACK_REPLAY
    await _wait_states(broker, replay, "ROLLED_BACK")
    await _wait_states(broker, first, "COMMITTED")
    assert await _bodies(broker, unique) == [f"row-{i}".encode() for i in range(5)]
    record = await read_record(options)
    assert record.latest_batch == 0
    assert record.markers["0"].tokens == {first.token}


async def test_driver_died_before_the_marker_then_rerun(broker: BrokerProcess, unique: str) -> None:
    """Executors sent halves; the driver died before commit. Nothing is visible; the re-run of the batch
    delivers each row once, and check-back rolls the orphans back once the marker names other tokens."""
    options = SinkOptions(broker.namesrv, unique, f"s{unique}")
    stop = asyncio.Event()
    resolver = asyncio.get_running_loop().create_task(run_resolver(options, stop))
    try:
        orphans = await send_task(options, "3", 0, _rows(unique, 0, 4))
        await asyncio.sleep(1.2)  # past the 500 ms timeout: check-backs answered UNKNOWN (batch 3 may commit)
        assert _states(broker, orphans) == {"PENDING"}
        rerun = [await send_task(options, "3", p, _rows(unique, 4 * p, 4)) for p in range(2)]
        assert await finish_epoch(options, "3", rerun) is CommitPlan.RECORD_AND_COMMIT
        await _wait_states(broker, orphans, "ROLLED_BACK")
        for result in rerun:
            await _wait_states(broker, result, "COMMITTED")
    finally:
        stop.set()
        await resolver
    assert await _bodies(broker, unique) == sorted(f"row-{i}".encode() for i in range(8))


async def test_marker_recorded_but_halves_not_ended(broker: BrokerProcess, unique: str) -> None:
    """The driver appended the marker and died before ending the halves: check-back commits them; a
    replay of that batch (Spark re-runs it: commits/N is missing) is rolled back."""
    from txmq.spark.sink_log import open_producer
    from txmq.spark.sink_plan import Marker

    options = SinkOptions(broker.namesrv, unique, f"s{unique}")
    sent = await send_task(options, "7", 1, _rows(unique, 0, 3))
    producer, marker_log = open_producer(options)
    await producer.start()
    try:
        await marker_log.append(producer, Marker(options.sink_id, "7", frozenset({sent.token}), 3))
    finally:
        await producer.close()  # "crash": no END_TRANSACTION sent
    resolver = subprocess.Popen(  # `txmq pipeline resolve`, the operator's resolver, answers the checks
        [PYTHON, "-m", "txmq", "pipeline", "resolve", "--sink-id", options.sink_id,
         "--endpoints", broker.namesrv],
        env=subprocess_env(broker.home), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert resolver.stdout is not None
        assert "resolving check-backs" in resolver.stdout.readline()
        await _wait_states(broker, sent, "COMMITTED")
        replay = await send_task(options, "7", 1, _rows(unique, 0, 3))
        assert await finish_epoch(options, "7", [replay]) is CommitPlan.ROLLBACK_REPLAY
        await _wait_states(broker, replay, "ROLLED_BACK")
    finally:
        resolver.send_signal(signal.SIGTERM)
        assert resolver.wait(timeout=30) == 0
    assert await _bodies(broker, unique) == [b"row-0", b"row-1", b"row-2"]


async def test_abort_rolls_back_unless_recorded(broker: BrokerProcess, unique: str) -> None:
    options = SinkOptions(broker.namesrv, unique, f"s{unique}")
    failed = await send_task(options, "job-a", 0, _rows(unique, 0, 2))
    await abort_epoch(options, "job-a", [failed, None])
    await _wait_states(broker, failed, "ROLLED_BACK")
    done: list[Any] = [await send_task(options, "job-b", 0, _rows(unique, 10, 2))]
    assert await finish_epoch(options, "job-b", done) is CommitPlan.RECORD_AND_COMMIT
    await abort_epoch(options, "job-b", done)  # a commit that failed after recording still completes
    await _wait_states(broker, done[0], "COMMITTED")
    assert await _bodies(broker, unique) == [b"row-10", b"row-11"]


async def test_a_failing_task_rolls_back_what_it_sent(broker: BrokerProcess, unique: str) -> None:
    options = SinkOptions(broker.namesrv, unique, f"s{unique}")

    def rows() -> Iterator[Message]:
        yield from _rows(unique, 0, 3)
        raise ValueError("a bad row")

    with pytest.raises(ValueError, match="a bad row"):
        await send_task(options, "0", 0, rows())
    pending = [t for t in call(broker.grpc, "tx.list", {}) if t["producer_group"] == options.group]
    assert pending == []
    assert await read_topic_async(broker.namesrv, unique) == []


class _FirstConnectionStalls(FaultSchedule):
    """The first connection to the broker (the task's producer) stalls past the send timeout once its
    registration went through (``after_bytes``) and the sends began."""

    def __init__(self, stall_ms: int, after_bytes: int) -> None:
        super().__init__(0)
        self.stall = ConnectionPlan(Fault.STALL, after_bytes=after_bytes, stall_ms=stall_ms)

    def plan(self, index: int) -> ConnectionPlan:
        return self.stall if index == 0 else ConnectionPlan()


async def test_a_resent_row_whose_first_try_was_stored_commits_once(tmp_path: Path, unique: str) -> None:
    """The replies of a task's half sends are held past the send timeout, so every row is re-sent while
    its first try reaches the broker too (stored, but the task never learns its transaction id). Only the
    try the task reported may commit: check-back rolls the first tries back, each row is visible once."""
    proxy_port = free_port()
    config = tmp_path / "broker.json"
    config.write_text(json.dumps({"remoting_advertised_addr": f"127.0.0.1:{proxy_port}"}))
    broker = BrokerProcess(tmp_path, *FAST_FLAGS, "--config", str(config))
    broker.start()
    stall = _FirstConnectionStalls(stall_ms=4_000, after_bytes=1_000)  # replies held past the 3 s timeout
    proxy = FaultProxy(("127.0.0.1", broker.remoting_port), stall)
    await proxy.start(proxy_port)
    stop = asyncio.Event()
    resolver: asyncio.Task[None] | None = None
    try:
        options = SinkOptions(broker.namesrv, unique, f"s{unique}")
        sent = await send_task(options, "0", 0, _rows(unique, 0, 30))
        assert sent.resent, "no row was re-sent: the stall did not outlast the send timeout"
        assert await finish_epoch(options, "0", [sent]) is CommitPlan.RECORD_AND_COMMIT
        resolver = asyncio.get_running_loop().create_task(run_resolver(options, stop))
        for _ in range(600):  # the first tries wait for check-back (transaction timeout 500 ms)
            if not [t for t in call(broker.grpc, "tx.list", {}) if t["producer_group"] == options.group]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("halves of the re-sent rows were never settled")
        assert await _bodies(broker, unique) == sorted(f"row-{i}".encode() for i in range(30))
    finally:
        stop.set()
        if resolver is not None:
            await resolver
        await proxy.close()
        broker.stop()


async def test_concurrent_attempts_of_one_task_commit_one(broker: BrokerProcess, unique: str) -> None:
    """Speculation: two attempts of the same task send the same rows at once; Spark hands the driver the
    commit message of one. The other's halves (its token is not in the marker) are rolled back by
    check-back, so each row is visible once. (A local SparkSession never launches speculative copies:
    they must run on another host, so the two attempts are run here directly.)"""
    options = SinkOptions(broker.namesrv, unique, f"s{unique}", check_immunity_s=0)
    winner, loser = await asyncio.gather(
        send_task(options, "4", 0, _rows(unique, 0, 50)), send_task(options, "4", 0, _rows(unique, 0, 50))
    )
    assert await finish_epoch(options, "4", [winner]) is CommitPlan.RECORD_AND_COMMIT
    stop = asyncio.Event()
    resolver = asyncio.get_running_loop().create_task(run_resolver(options, stop))
    try:
        await _wait_states(broker, loser, "ROLLED_BACK")
        await _wait_states(broker, winner, "COMMITTED")
    finally:
        stop.set()
        await resolver
    assert await _bodies(broker, unique) == sorted(f"row-{i}".encode() for i in range(50))
