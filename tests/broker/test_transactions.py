"""The transaction service stepped with a FakeClock: commit, rollback, check-back, immunity, discard,
resume, late commit, conflicts and restart mid-check. A RecordingChannel stands in for the producer's
Telemetry stream (the broker only needs something that accepts a check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.broker.broker import Broker
from txmq.broker.send import SendContext
from txmq.common import errors, names
from txmq.common.clock import FakeClock
from txmq.common.message import Message

from .conftest import attach_producer, make_config

CTX = SendContext(producer_group="pg", born_host="127.0.0.1:1")


async def half(broker: Broker, body: bytes = b"tx", **kw: object) -> tuple[str, str]:
    (result,) = await broker.send([Message(topic="pay", body=body, transactional=True, **kw)], CTX)  # type: ignore[arg-type]
    assert result.transaction_id is not None
    return result.message_id, result.transaction_id


async def visible(broker: Broker, topic: str = "pay") -> list[bytes]:
    got = await broker.receive(
        group="reader", topic=topic, expression="*", batch_size=64, invisible_ms=60_000, long_poll_ms=0
    )
    return [v.body for v in got]


async def end(broker: Broker, mid: str, txid: str, commit: bool | None, *, from_check: bool = False) -> None:
    await broker.end_transaction(
        topic="pay", message_id=mid, transaction_id=txid, commit=commit, from_check=from_check
    )


async def test_half_invisible_until_commit(broker: Broker) -> None:
    mid, txid = await half(broker, b"debit-1")
    assert await visible(broker) == []
    await end(broker, mid, txid, True)
    assert await visible(broker) == [b"debit-1"]


async def test_rollback_never_visible(broker: Broker, clock: FakeClock) -> None:
    mid, txid = await half(broker)
    await end(broker, mid, txid, False)
    clock.advance(120_000)
    await broker.tick(clock.now_ms())
    assert await visible(broker) == []


async def test_duplicate_commit_is_idempotent_and_conflict_rejected(broker: Broker) -> None:
    mid, txid = await half(broker, b"once")
    await end(broker, mid, txid, True)
    await end(broker, mid, txid, True)
    with pytest.raises(errors.Conflict):
        await end(broker, mid, txid, False)
    assert await visible(broker) == [b"once"]
    history = broker.transactions.show(txid)["history"]
    assert [h["kind"] for h in history] == ["HALF_STORED", "DECISION", "CONFLICT"]


async def test_wrong_ids_rejected(broker: Broker) -> None:
    mid, txid = await half(broker)
    with pytest.raises(errors.InvalidTransactionId):
        await end(broker, mid, "not-a-txid", True)
    with pytest.raises(errors.InvalidTransactionId):
        await end(broker, "another-message", txid, True)


async def test_check_back_after_timeout_then_commit_from_check(broker: Broker, clock: FakeClock) -> None:
    channel = attach_producer(broker, "p1", "pg")
    mid, txid = await half(broker, b"orphan")
    clock.advance(5_999)
    await broker.tick(clock.now_ms())
    assert channel.checks == []
    clock.advance(1)
    await broker.tick(clock.now_ms())
    assert len(channel.checks) == 1
    view, checked_txid = channel.checks[0]
    assert checked_txid == txid and view.topic == "pay" and view.body == b"orphan" and view.message_id == mid
    await end(broker, mid, txid, True, from_check=True)
    assert await visible(broker) == [b"orphan"]
    clock.advance(300_000)
    await broker.tick(clock.now_ms())
    assert len(channel.checks) == 1, "a resolved transaction must never be checked again"


async def test_immunity_time_delays_first_check(broker: Broker, clock: FakeClock) -> None:
    channel = attach_producer(broker, "p1", "pg")
    await half(broker, check_immunity_s=60)
    clock.advance(59_000)
    await broker.tick(clock.now_ms())
    assert channel.checks == []
    clock.advance(1_000)
    await broker.tick(clock.now_ms())
    assert len(channel.checks) == 1


async def test_unknown_until_max_then_discard_then_resume_then_late_commit(
    broker: Broker, clock: FakeClock
) -> None:
    channel = attach_producer(broker, "p1", "pg")
    mid, txid = await half(broker, b"stuck")
    clock.advance(6_000)
    for _ in range(3):  # check max is 3 in the test config
        await broker.tick(clock.now_ms())
        await end(broker, mid, txid, None, from_check=True)
        clock.advance(30_000)
    assert len(channel.checks) == 3
    await broker.tick(clock.now_ms())
    assert broker.transactions.discarded == 1
    rows = broker.transactions.list_pending()
    assert [(r["transaction_id"], r["state"], r["checks"]) for r in rows] == [(txid, "DISCARDED", 3)]
    discarded = await visible(broker, names.CHECK_MAX_TIME_TOPIC)
    assert discarded == [b"stuck"]
    await broker.transactions.resume(txid)
    await broker.tick(clock.now_ms())
    assert len(channel.checks) == 4
    await end(broker, mid, txid, True, from_check=True)
    assert await visible(broker) == [b"stuck"]
    assert broker.transactions.list_pending() == []


async def test_no_producer_means_no_check_counted(broker: Broker, clock: FakeClock) -> None:
    _mid, txid = await half(broker)
    for _ in range(10):
        clock.advance(30_000)
        await broker.tick(clock.now_ms())
    assert broker.transactions.discarded == 0
    assert broker.transactions.show(txid)["checks"] == 0
    channel = attach_producer(broker, "late-producer", "pg")
    clock.advance(6_000)
    await broker.tick(clock.now_ms())
    assert len(channel.checks) == 1


async def test_check_goes_to_another_producer_when_one_is_gone(broker: Broker, clock: FakeClock) -> None:
    first = attach_producer(broker, "p1", "pg")
    first.open = False
    second = attach_producer(broker, "p2", "pg")
    await half(broker)
    clock.advance(6_000)
    await broker.tick(clock.now_ms())
    assert first.checks == [] and len(second.checks) == 1


async def test_restart_mid_check_keeps_counts_and_decisions(tmp_path: Path, clock: FakeClock) -> None:
    config = make_config(tmp_path)
    broker = await Broker.open(config, clock=clock)
    attach_producer(broker, "p1", "pg")
    mid_a, tx_a = await half(broker, b"a")
    _mid_b, tx_b = await half(broker, b"b")
    clock.advance(6_000)
    await broker.tick(clock.now_ms())
    await end(broker, mid_a, tx_a, True, from_check=True)
    await broker.close()

    broker = await Broker.open(config, clock=clock)
    try:
        channel = attach_producer(broker, "p1", "pg")
        assert broker.transactions.show(tx_b)["checks"] == 1
        clock.advance(30_000)
        await broker.tick(clock.now_ms())
        assert [t for _, t in channel.checks] == [tx_b]
        assert broker.transactions.show(tx_b)["checks"] == 2
        with pytest.raises(errors.Conflict):
            await end(broker, mid_a, tx_a, False)
        assert await visible(broker) == [b"a"]
    finally:
        await broker.close()


async def test_transaction_with_delay_is_delayed_from_commit(broker: Broker, clock: FakeClock) -> None:
    mid, txid = await half(broker, b"later", delay_level=3)  # 10 s
    clock.advance(8_000)
    await end(broker, mid, txid, True)
    clock.advance(9_999)
    await broker.tick(clock.now_ms())
    assert await visible(broker) == []
    clock.advance(1)
    await broker.tick(clock.now_ms())
    assert await visible(broker) == [b"later"]


async def test_snapshot_with_early_decisions_restores_them(tmp_path: Path, clock: FakeClock) -> None:
    """Decided halves the cursor has not reached are rebuilt after a restart from the op records the
    snapshot points at (``early_from``; they are not in the snapshot itself): they are neither checked
    nor decided again."""
    import json

    config = make_config(tmp_path)
    broker = await Broker.open(config, clock=clock)
    attach_producer(broker, "p1", "pg")
    pending_mid, pending_tx = await half(broker, b"pending")
    clock.advance(6_000)
    await broker.tick(clock.now_ms())  # the pending half is watched and checked once
    decided = [await half(broker, f"d{k}".encode()) for k in range(3)]
    for k, (mid, txid) in enumerate(decided):
        await end(broker, mid, txid, k != 1)  # commit, roll back, commit: early records
    conflicted_mid, conflicted_tx = decided[0]
    with pytest.raises(errors.Conflict):
        await end(broker, conflicted_mid, conflicted_tx, False)  # an early record with a conflict
    service = broker.transactions
    text = service.snapshot_json()
    document = json.loads(text)
    assert text == json.dumps(document, sort_keys=True, separators=(",", ":"))
    assert "early" not in document and len(document["watched"]) == 1
    early = dict(service._early)
    assert len(early) == 3
    service.save()
    await broker.close()

    broker = await Broker.open(config, clock=clock)
    try:
        assert json.loads(broker.transactions.snapshot_json()) == document
        assert broker.transactions._early == early  # the conflict included
        channel = attach_producer(broker, "p1", "pg")
        clock.advance(60_000)
        await broker.tick(clock.now_ms())
        assert [t for _, t in channel.checks] == [pending_tx]  # decided ones are never checked
        await end(broker, pending_mid, pending_tx, False)
        assert sorted(await visible(broker)) == [b"d0", b"d2"]
    finally:
        await broker.close()


async def test_snapshot_written_only_when_it_changed(tmp_path: Path, clock: FakeClock) -> None:
    """An idle broker does not rewrite its transaction snapshot every second (two fsyncs and a rename
    on the event loop each time): a save of an unchanged snapshot writes nothing."""
    broker = await Broker.open(make_config(tmp_path), clock=clock)
    try:
        attach_producer(broker, "p1", "pg")
        await half(broker, b"pending")
        broker.transactions.save()
        (snapshot,) = tmp_path.rglob("transactions.json")
        snapshot.rename(snapshot.with_suffix(".seen"))  # a write would put it back
        for _ in range(3):
            clock.advance(1_500)
            await broker.tick(clock.now_ms())
            broker.transactions.save()
        assert not snapshot.exists()
        mid, txid = await half(broker, b"decided")
        await end(broker, mid, txid, True)
        broker.transactions.save()
        assert snapshot.exists()
    finally:
        await broker.close()


async def test_remoting_halves_and_decisions_of_one_turn_share_the_groups_future(broker: Broker) -> None:
    """The remoting door only adds done callbacks to a half's or an END's durable awaitable: the halves
    (and the decisions) appended in one loop turn get their write group's one future, not one each;
    each answer still completes once its records are durable, and the commits are visible once."""
    sender = broker.sender
    halves = [sender.half_append(Message(topic="pay", body=b, transactional=True), CTX) for b in (b"a", b"b")]
    assert halves[0].durable is halves[1].durable
    await halves[0].durable
    ids = [sender.half_answer_fields(h)[0] for h in halves]
    started = [
        broker.end_transaction_nowait(
            topic="pay", message_id="", transaction_id=txid, commit=True, from_check=False
        )
        for txid in ids
    ]
    pairs = [s for s in started if isinstance(s, tuple)]
    assert len(pairs) == 2 and pairs[0][0] is pairs[1][0]
    await pairs[0][0]
    for _, finish in pairs:
        finish(None)
    assert sorted(await visible(broker)) == [b"a", b"b"]
