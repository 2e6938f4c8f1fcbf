"""Decided transactions cost an idle broker nothing: once the check cursor has passed them (a single
durable step), rounds of the check service and the store's checkpoints write no record, no snapshot and
no checkpoint over several check periods, while an undecided half is still checked. The snapshot does
not carry decided halves the cursor has not reached (rate x timeout of them under load, rewritten every
second): a restart rebuilds them from the op records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from txmq.broker.broker import Broker
from txmq.broker.send import SendContext
from txmq.common import errors
from txmq.common.clock import FakeClock
from txmq.common.message import Message

from .conftest import attach_producer, make_config

CTX = SendContext(producer_group="pg", born_host="127.0.0.1:1")
DECIDED = 60


async def _decided(broker: Broker, count: int) -> list[tuple[str, str, bool]]:
    """``count`` transactions decided at once (every third rolled back): (message id, txid, commit)."""
    done = []
    for k in range(count):
        (sent,) = await broker.send([Message(topic="pay", body=b"d%d" % k, transactional=True)], CTX)
        assert sent.transaction_id is not None
        commit = k % 3 != 1
        await broker.end_transaction(
            topic="pay", message_id=sent.message_id, transaction_id=sent.transaction_id, commit=commit,
            from_check=False,
        )  # fmt: skip
        done.append((sent.message_id, sent.transaction_id, commit))
    return done


async def _round(broker: Broker, clock: FakeClock, step_ms: int) -> None:
    clock.advance(step_ms)
    await broker.tick(clock.now_ms())
    broker.transactions.save()
    broker.store.checkpoint()  # what the store's checkpoint task does every second


async def test_idle_broker_with_decided_transactions_writes_nothing(tmp_path: Path, clock: FakeClock) -> None:
    config = make_config(tmp_path)
    broker = await Broker.open(config, clock=clock)
    try:
        attach_producer(broker, "p1", "pg")
        await _decided(broker, DECIDED)
        for _ in range(7):  # past the 6 s timeout: the cursor passes every decided half, durably
            await _round(broker, clock, 1_000)
        assert broker.transactions._cursor == DECIDED and not broker.transactions._early
        flushes = broker.store.flush_count
        (snapshot,) = tmp_path.rglob("transactions.json")
        (checkpoint,) = tmp_path.rglob("checkpoint")
        for path in (snapshot, checkpoint):
            path.rename(path.with_suffix(".seen"))  # a write would put it back
        for _ in range(3 * 30):  # three check intervals, a round a second
            await _round(broker, clock, 1_000)
        assert broker.store.flush_count == flushes
        assert not snapshot.exists() and not checkpoint.exists()
        for path in (snapshot, checkpoint):
            path.with_suffix(".seen").rename(path)
    finally:
        await broker.close()
    reopened = await Broker.open(config, clock=clock)
    try:
        channel = attach_producer(reopened, "p1", "pg")
        clock.advance(120_000)
        await reopened.tick(clock.now_ms())
        assert channel.checks == []  # the cursor's progress was durable: nothing decided is checked
    finally:
        await reopened.close()


async def test_undecided_half_is_still_checked_among_decided(tmp_path: Path, clock: FakeClock) -> None:
    broker = await Broker.open(make_config(tmp_path), clock=clock)
    try:
        channel = attach_producer(broker, "p1", "pg")
        await _decided(broker, DECIDED // 2)
        (pending,) = await broker.send([Message(topic="pay", body=b"open", transactional=True)], CTX)
        await _decided(broker, DECIDED // 2)
        for _ in range(7):
            await _round(broker, clock, 1_000)
        assert [t for _, t in channel.checks] == [pending.transaction_id]
        for _ in range(30):  # the check interval (30 s): checked once more, nothing else
            await _round(broker, clock, 1_000)
        assert [t for _, t in channel.checks] == [pending.transaction_id] * 2
    finally:
        await broker.close()


async def test_snapshot_does_not_grow_with_decided_halves_before_the_cursor(
    tmp_path: Path, clock: FakeClock
) -> None:
    broker = await Broker.open(make_config(tmp_path), clock=clock)
    try:
        await _decided(broker, 1)
        one = broker.transactions.snapshot_json()
        await _decided(broker, DECIDED)
        many = broker.transactions.snapshot_json()
        assert len(broker.transactions._early) == DECIDED + 1  # within the timeout: none examined yet
        assert json.loads(many)["watched"] == [] and len(many) <= len(one) + 8  # offsets grow, not a list
    finally:
        await broker.close()


async def test_crash_after_the_snapshot_rebuilds_early_records_from_the_op_log(
    tmp_path: Path, clock: FakeClock
) -> None:
    """A snapshot saved with early records, then more decisions (a conflict on an early half, new
    halves), then a crash: the restarted service holds the same early records, checks only the
    undecided half, and a decided one stays decided (a late opposite decision is still a conflict)."""
    broker = await Broker.open(make_config(tmp_path / "live"), clock=clock)
    try:
        attach_producer(broker, "p1", "pg")
        decided = await _decided(broker, 5)
        (pending,) = await broker.send([Message(topic="pay", body=b"open", transactional=True)], CTX)
        clock.advance(3_000)
        await broker.tick(clock.now_ms())
        broker.transactions.save()  # early records of the five, none examined yet
        decided += await _decided(broker, 4)
        mid, txid, commit = decided[0]
        with pytest.raises(errors.Conflict):
            await broker.end_transaction(
                topic="pay", message_id=mid, transaction_id=txid, commit=not commit, from_check=False
            )
        early = dict(broker.transactions._early)
        assert len(early) == 9 and early[min(early)].conflicts == 1
        shutil.copytree(tmp_path / "live", tmp_path / "crashed")  # every record is fsynced (SYNC mode)
    finally:
        await broker.close()
    restarted = await Broker.open(make_config(tmp_path / "crashed"), clock=clock)
    try:
        assert restarted.transactions._early == early
        channel = attach_producer(restarted, "p1", "pg")
        clock.advance(10_000)
        await restarted.tick(clock.now_ms())
        assert [t for _, t in channel.checks] == [pending.transaction_id]
        mid, txid, commit = decided[-1]
        with pytest.raises(errors.Conflict):
            await restarted.end_transaction(
                topic="pay", message_id=mid, transaction_id=txid, commit=not commit, from_check=False
            )
    finally:
        await restarted.close()
