"""Consumer dedup on SQLite and a real PostgreSQL: duplicates, rollbacks, concurrent deliveries, cleanup."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from tests.integration.sql_engines import ENGINE_KINDS, open_engine
from txmq.client.idempotency import Deduplicator
from txmq.common import errors
from txmq.common.clock import FakeClock


@pytest.fixture(params=ENGINE_KINDS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    eng = open_engine(request.param, tmp_path, file_name="consumer.db", sqlite_timeout_s=30, pool_size=10)
    yield eng
    eng.dispose()


@dataclass
class Env:
    engine: Engine
    clock: FakeClock
    dedup: Deduplicator
    credits: sa.Table


@pytest.fixture
def env(engine: Engine) -> Iterator[Env]:
    suffix = uuid.uuid4().hex[:10]
    clock = FakeClock()
    dedup = Deduplicator(engine, f"txmq_processed_{suffix}", consumer_group="svc-b", clock=clock)
    dedup.create_schema()
    meta = sa.MetaData()
    credits = sa.Table(
        f"credits_{suffix}",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(64)),
    )
    meta.create_all(engine)
    yield Env(engine, clock, dedup, credits)
    dedup.drop_schema()
    meta.drop_all(engine)


def _consume(env: Env, key: str, *, fail: bool = False) -> bool:
    """One delivery: dedup and the business change in one transaction. Returns whether work was done."""
    with Session(env.engine) as session, session.begin():
        if not env.dedup.process_once(session, key):
            return False
        session.execute(env.credits.insert().values(key=key))
        if fail:
            raise RuntimeError("consumer crashed mid-batch")
    return True


def _credits(env: Env) -> list[str]:
    with env.engine.connect() as conn:
        return [str(k) for k in conn.execute(sa.select(env.credits.c.key)).scalars()]


def test_duplicate_delivery_is_skipped(env: Env) -> None:
    assert _consume(env, "m-1") is True
    assert _consume(env, "m-1") is False
    assert _consume(env, "m-2") is True
    assert sorted(_credits(env)) == ["m-1", "m-2"]
    assert env.dedup.seen("m-1")
    assert not env.dedup.seen("m-3")


def test_rolled_back_work_is_redone(env: Env) -> None:
    with pytest.raises(RuntimeError):
        _consume(env, "m-1", fail=True)
    assert not env.dedup.seen("m-1")
    assert _consume(env, "m-1") is True
    assert _credits(env) == ["m-1"]


def test_groups_are_independent(env: Env) -> None:
    other = Deduplicator(env.engine, env.dedup.table.name, consumer_group="svc-c", clock=env.clock)
    with env.engine.begin() as conn:
        assert env.dedup.process_once(conn, "m-1")
        assert other.process_once(conn, "m-1")
        assert not other.process_once(conn, "m-1")


def test_concurrent_duplicate_deliveries_process_once(env: Env) -> None:
    workers = 6
    barrier = threading.Barrier(workers)
    results: list[bool] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def deliver() -> None:
        barrier.wait()
        try:
            done = _consume(env, "m-dup")
        except BaseException as exc:
            with lock:
                failures.append(exc)
            return
        with lock:
            results.append(done)

    threads = [threading.Thread(target=deliver) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert sorted(results) == [False] * (workers - 1) + [True]
    assert _credits(env) == ["m-dup"]


def test_cleanup_forgets_old_keys(env: Env) -> None:
    _consume(env, "old")
    env.clock.advance(86_400_000)
    _consume(env, "new")
    assert env.dedup.cleanup(older_than_s=3600) == 1
    assert not env.dedup.seen("old")
    assert env.dedup.seen("new")


def test_bad_keys_rejected(env: Env) -> None:
    with env.engine.begin() as conn:
        with pytest.raises(errors.InvalidArgument):
            env.dedup.process_once(conn, "")
        with pytest.raises(errors.InvalidArgument):
            env.dedup.process_once(conn, "k" * 513)


def test_savepoint_fallback_keeps_the_transaction_usable(env: Env) -> None:
    """The generic path (dialects without ON CONFLICT) leaves the caller's transaction usable."""
    with Session(env.engine) as session, session.begin():
        assert env.dedup._insert_in_savepoint(session, _values("m-sp"))
        assert not env.dedup._insert_in_savepoint(session, _values("m-sp"))
        session.execute(env.credits.insert().values(key="m-sp"))
    assert _credits(env) == ["m-sp"]


def _values(key: str) -> dict[str, object]:
    return {"consumer_group": "svc-b", "dedup_key": key, "processed_at_ms": 0}
