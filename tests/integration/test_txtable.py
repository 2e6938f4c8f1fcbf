"""The transaction table on SQLite and on a real PostgreSQL: record, check, fence, cleanup, listener."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from tests.integration.sql_engines import ENGINE_KINDS, open_engine
from txmq.client.transaction_state import LocalTransactionState, TransactionListener
from txmq.client.txtable import TableBackedListener, TransactionTable, transaction_id_of
from txmq.common import errors
from txmq.common.clock import FakeClock

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


@pytest.fixture(params=ENGINE_KINDS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    eng = open_engine(request.param, tmp_path, file_name="app.db", sqlite_timeout_s=0.2, pool_size=8)
    yield eng
    eng.dispose()


@dataclass
class Env:
    engine: Engine
    clock: FakeClock
    table: TransactionTable
    accounts: sa.Table


@pytest.fixture
def env(engine: Engine) -> Iterator[Env]:
    suffix = uuid.uuid4().hex[:10]
    clock = FakeClock()
    table = TransactionTable(engine, f"txmq_tx_{suffix}", grace_period_s=60, clock=clock)
    table.create_schema()
    meta = sa.MetaData()
    accounts = sa.Table(
        f"accounts_{suffix}",
        meta,
        sa.Column("name", sa.String(20), primary_key=True),
        sa.Column("cents", sa.Integer),
    )
    meta.create_all(engine)
    with engine.begin() as conn:
        conn.execute(accounts.insert().values(name="alice", cents=1000))
    yield Env(engine, clock, table, accounts)
    table.drop_schema()
    meta.drop_all(engine)


@dataclass(frozen=True)
class HalfMsg:
    """What the SDK hands the listener: the half message's view (only the fields the table reads)."""

    topic: str
    transaction_id: str
    born_timestamp_ms: int
    message_id: str = "msg-1"


def _balance(env: Env) -> int:
    with env.engine.connect() as conn:
        return int(
            conn.execute(sa.select(env.accounts.c.cents).where(env.accounts.c.name == "alice")).scalar_one()
        )


def _debit(env: Env, cents: int) -> Any:
    def do_business(session: Session, msg: Any, arg: Any) -> None:
        session.execute(
            env.accounts.update()
            .where(env.accounts.c.name == "alice")
            .values(cents=env.accounts.c.cents - cents)
        )
        if arg == "fail":
            raise RuntimeError("business rule broken")

    return do_business


def test_check_answers_from_the_table(env: Env) -> None:
    born = env.clock.now_ms()
    with env.engine.begin() as conn:
        env.table.record(conn, "tx-committed", producer_group="g", topic="t", message_id="m")
    assert env.table.check("tx-committed", born_ms=born) is COMMIT
    assert env.table.check("tx-young", born_ms=born) is UNKNOW
    env.clock.advance(59_999)
    assert env.table.check("tx-young", born_ms=born) is UNKNOW
    env.clock.advance(1)
    assert env.table.check("tx-young", born_ms=born) is ROLLBACK  # fenced at exactly the grace period
    assert env.table.lookup("tx-young") == "R"
    assert env.table.check("tx-young", born_ms=born) is ROLLBACK  # stable answer
    assert env.table.check("tx-no-born", born_ms=None) is UNKNOW
    with pytest.raises(errors.InvalidTransactionId):
        env.table.check("", born_ms=born)


def test_listener_commit_and_rollback(env: Env) -> None:
    listener = TableBackedListener(env.table, _debit(env, 100), producer_group="g")
    assert isinstance(listener, TransactionListener)
    born = env.clock.now_ms()
    assert listener.execute_local_transaction(HalfMsg("t", "tx-1", born), None) is COMMIT
    assert _balance(env) == 900
    assert listener.execute_local_transaction(HalfMsg("t", "tx-2", born), "fail") is ROLLBACK
    assert _balance(env) == 900  # the debit rolled back with the failed business transaction
    env.clock.advance(120_000)
    assert listener.check_local_transaction(HalfMsg("t", "tx-1", born)) is COMMIT
    assert listener.check_local_transaction(HalfMsg("t", "tx-2", born)) is ROLLBACK
    # Executing the same transaction id twice cannot debit twice: the second record() hits the key.
    assert listener.execute_local_transaction(HalfMsg("t", "tx-1", born), None) is ROLLBACK
    assert _balance(env) == 900


def test_fence_stops_a_business_transaction_that_outlived_the_grace_period(env: Env) -> None:
    born = env.clock.now_ms()
    env.clock.advance(60_000)
    assert env.table.check("tx-slow", born_ms=born) is ROLLBACK
    listener = TableBackedListener(env.table, _debit(env, 100))
    assert listener.execute_local_transaction(HalfMsg("t", "tx-slow", born), None) is ROLLBACK
    assert _balance(env) == 1000  # the broker was told ROLLBACK, and the money did not move


def test_check_racing_an_open_business_transaction(env: Env, engine: Engine) -> None:
    """A check past the grace period while the business transaction is open never contradicts it."""
    born = env.clock.now_ms()
    env.clock.advance(60_000)
    session = Session(engine)
    session.begin()
    _debit(env, 100)(session, None, None)
    env.table.record(session, "tx-race")
    session.flush()
    answers: list[LocalTransactionState] = []
    checker = threading.Thread(target=lambda: answers.append(env.table.check("tx-race", born_ms=born)))
    checker.start()
    if engine.dialect.name == "sqlite":
        checker.join()  # SQLite: the database is locked by the writer, the check says "ask again"
        session.commit()
        assert answers == [UNKNOW]
    else:
        session.commit()  # PostgreSQL: the fence insert waits for this transaction, then sees the key
        checker.join()
        assert answers == [COMMIT]
    session.close()
    assert env.table.check("tx-race", born_ms=born) is COMMIT
    assert _balance(env) == 900


def test_cleanup_deletes_only_old_rows(env: Env) -> None:
    with env.engine.begin() as conn:
        env.table.record(conn, "old")
    env.clock.advance(3_600_000)
    with env.engine.begin() as conn:
        env.table.record(conn, "new")
    assert env.table.cleanup(older_than_s=1800) == 1
    assert env.table.lookup("old") is None
    assert env.table.lookup("new") == "C"
    assert env.table.cleanup(older_than_s=1800) == 0


def test_transaction_id_lookup_order() -> None:
    @dataclass
    class WithProps:
        properties: dict[str, str]

    assert transaction_id_of(HalfMsg("t", "a", 0)) == "a"
    assert transaction_id_of(WithProps({"__transactionId__": "b"})) == "b"
    assert transaction_id_of(object(), {"transaction_id": "c"}) == "c"
    with pytest.raises(errors.InvalidTransactionId):
        transaction_id_of(object(), None)


def test_unknown_alias() -> None:
    assert LocalTransactionState["UNKNOWN"] is LocalTransactionState.UNKNOW
    state: LocalTransactionState = LocalTransactionState.UNKNOWN
    assert state is LocalTransactionState.UNKNOW
    assert [s.name for s in LocalTransactionState] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]
