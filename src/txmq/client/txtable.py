"""The transaction table: answer check-backs from the producer's own database (SQLAlchemy 2.x).

The producer records the transaction id **in the same database transaction as its business change**
(:meth:`TransactionTable.record`). Then the row exists if and only if the business change committed, and a
check-back can be answered without guessing (:meth:`TransactionTable.check`):

* row marked committed → ``COMMIT_MESSAGE``;
* no row, half message younger than the grace period → ``UNKNOW`` (the local transaction may still run);
* no row, older than the grace period → the table first inserts a **fence** row marked rolled back, in its
  own transaction, then answers ``ROLLBACK_MESSAGE``. The fence makes the answer true: a business
  transaction still running past the grace period will fail its own ``record`` on the primary key and
  roll back, instead of committing a change whose message was just rolled back. If the fence insert hits
  the key, the business transaction committed meanwhile: ``COMMIT_MESSAGE``. If the database is busy
  (SQLite's lock), the answer is ``UNKNOW`` and the broker asks again.

Table ``txmq_transactions`` (name configurable): ``transaction_id`` (primary key), ``producer_group``,
``topic``, ``message_id``, ``created_at_ms`` (epoch ms from the injected clock), ``state`` (``C`` committed,
``R`` rollback fence).

**Where the transaction id comes from.** The broker assigns it when it stores the half message, before
the local transaction runs. :class:`TableBackedListener` reads it from ``msg.transaction_id`` (the SDK
passes the half message's view), else from ``msg.properties["__transactionId__"]``, else from ``arg``
when ``arg`` is a mapping with a ``"transaction_id"`` key. The born time used for the grace period comes
from ``msg.born_timestamp_ms`` (the producer's own clock, the one that also runs the grace period).

**Cleanup.** :meth:`TransactionTable.cleanup` deletes rows older than a threshold that must exceed the
broker's whole check horizon (immunity + check_max × check interval, about 7.5 minutes by default):
after the row is gone, a late check would be answered with a rollback fence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, CursorResult, Engine
from sqlalchemy.orm import Session

from txmq.client.transaction_state import LocalTransactionState
from txmq.common import errors, properties
from txmq.common.clock import Clock, SystemClock

log = logging.getLogger(__name__)

COMMITTED: Final = "C"
ROLLBACK_FENCE: Final = "R"
DEFAULT_TABLE: Final = "txmq_transactions"
DEFAULT_GRACE_PERIOD_S: Final = 60.0

Executor = Session | Connection


class TransactionTable:
    """One table of transaction ids in the producer's database; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        table_name: str = DEFAULT_TABLE,
        *,
        grace_period_s: float = DEFAULT_GRACE_PERIOD_S,
        clock: Clock | None = None,
        schema: str | None = None,
    ) -> None:
        if grace_period_s < 0:
            raise ValueError(f"grace_period_s must be >= 0, not {grace_period_s}")
        self.engine = engine
        self.grace_period_ms = round(grace_period_s * 1000)
        self.clock: Clock = clock or SystemClock()
        self.metadata = sa.MetaData(schema=schema)
        self.table = sa.Table(
            table_name,
            self.metadata,
            sa.Column("transaction_id", sa.String(128), primary_key=True),
            sa.Column("producer_group", sa.String(255), nullable=False, default=""),
            sa.Column("topic", sa.String(255), nullable=False, default=""),
            sa.Column("message_id", sa.String(128), nullable=True),
            sa.Column("created_at_ms", sa.BigInteger, nullable=False, index=True),
            sa.Column("state", sa.String(1), nullable=False),
        )

    def create_schema(self) -> None:
        """Create the table (and its index) if missing."""
        self.metadata.create_all(self.engine)

    def drop_schema(self) -> None:
        self.metadata.drop_all(self.engine)

    def record(
        self,
        executor: Executor,
        transaction_id: str,
        *,
        producer_group: str = "",
        topic: str = "",
        message_id: str | None = None,
    ) -> None:
        """Insert the committed row inside the caller's open business transaction (Session or Connection).

        Raises ``sqlalchemy.exc.IntegrityError`` when the id is already there, in particular when a check
        has already fenced it as rolled back: the business transaction must then roll back.
        """
        _require_id(transaction_id)
        executor.execute(
            self.table.insert().values(
                transaction_id=transaction_id,
                producer_group=producer_group,
                topic=topic,
                message_id=message_id,
                created_at_ms=self.clock.now_ms(),
                state=COMMITTED,
            )
        )

    def lookup(self, transaction_id: str) -> str | None:
        """The stored state (``"C"``, ``"R"``) or ``None``."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(self.table.c.state).where(self.table.c.transaction_id == transaction_id)
            ).first()
        return None if row is None else str(row[0])

    def check(self, transaction_id: str, *, born_ms: int | None) -> LocalTransactionState:
        """Answer a check-back for ``transaction_id`` whose half message was born at ``born_ms``."""
        _require_id(transaction_id)
        try:
            state = self.lookup(transaction_id)
            if state is not None:
                return _answer(state)
            if born_ms is None or self.clock.now_ms() - born_ms < self.grace_period_ms:
                return LocalTransactionState.UNKNOW
            return self._fence(transaction_id)
        except sa_exc.OperationalError as exc:  # database locked or unreachable: ask again later
            log.warning("transaction table check for %s failed, answering UNKNOW: %s", transaction_id, exc)
            return LocalTransactionState.UNKNOW

    def _fence(self, transaction_id: str) -> LocalTransactionState:
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    self.table.insert().values(
                        transaction_id=transaction_id, created_at_ms=self.clock.now_ms(), state=ROLLBACK_FENCE
                    )
                )
        except sa_exc.IntegrityError:
            state = self.lookup(transaction_id)  # the business transaction won the race
            return LocalTransactionState.UNKNOW if state is None else _answer(state)
        return LocalTransactionState.ROLLBACK_MESSAGE

    def cleanup(self, older_than_s: float) -> int:
        """Delete rows created more than ``older_than_s`` ago; returns how many."""
        cutoff = self.clock.now_ms() - round(older_than_s * 1000)
        with self.engine.begin() as conn:
            result: CursorResult[Any] = conn.execute(
                self.table.delete().where(self.table.c.created_at_ms < cutoff)
            )
            return int(result.rowcount)


def _answer(state: str) -> LocalTransactionState:
    if state == COMMITTED:
        return LocalTransactionState.COMMIT_MESSAGE
    return LocalTransactionState.ROLLBACK_MESSAGE


def _require_id(transaction_id: str) -> None:
    if not transaction_id or len(transaction_id) > 128:
        raise errors.InvalidTransactionId(f"transaction id {transaction_id[:64]!r} is empty or too long")


def transaction_id_of(msg: Any, arg: Any = None) -> str:
    """The transaction id of ``msg`` (see the module docstring for where it is looked up)."""
    value = getattr(msg, "transaction_id", None)
    if not value:
        props = getattr(msg, "properties", None)
        if isinstance(props, Mapping):
            value = props.get(properties.TRANSACTION_ID)
    if not value and isinstance(arg, Mapping):
        value = arg.get("transaction_id")
    if not isinstance(value, str) or not value:
        raise errors.InvalidTransactionId(
            "no transaction id: pass the half message (msg.transaction_id) or arg={'transaction_id': ...}"
        )
    return value


BusinessFn = Callable[[Session, Any, Any], None]


class TableBackedListener:
    """A :class:`~txmq.client.transaction_state.TransactionListener` backed by a :class:`TransactionTable`.

    ``execute_local_transaction`` opens one database transaction, runs ``do_business(session, msg, arg)``
    and records the transaction id in it. The result: it committed → ``COMMIT_MESSAGE``; ``do_business``
    or ``record`` raised (nothing was committed) → ``ROLLBACK_MESSAGE``; the COMMIT itself failed (its
    outcome is unknown) → ``UNKNOW``, and the check-back will read the truth from the table.
    """

    def __init__(self, table: TransactionTable, do_business: BusinessFn, *, producer_group: str = "") -> None:
        self.table = table
        self.do_business = do_business
        self.producer_group = producer_group

    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        transaction_id = transaction_id_of(msg, arg)
        with Session(self.table.engine) as session:
            return self._run(session, transaction_id, msg, arg)

    def _run(self, session: Session, transaction_id: str, msg: Any, arg: Any) -> LocalTransactionState:
        try:
            session.begin()
            self.do_business(session, msg, arg)
            self.table.record(
                session,
                transaction_id,
                producer_group=self.producer_group,
                topic=str(getattr(msg, "topic", "")),
                message_id=getattr(msg, "message_id", None),
            )
            session.flush()
        except Exception:  # any failure before COMMIT means nothing was committed
            log.exception("local transaction %s failed; rolling back", transaction_id)
            session.rollback()
            return LocalTransactionState.ROLLBACK_MESSAGE
        try:
            session.commit()
        except Exception:  # the COMMIT's outcome is unknown; the check reads the table
            log.exception("commit of local transaction %s failed; answering UNKNOW", transaction_id)
            return LocalTransactionState.UNKNOW
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        born = getattr(msg, "born_timestamp_ms", None)
        return self.table.check(transaction_id_of(msg), born_ms=born if isinstance(born, int) else None)
