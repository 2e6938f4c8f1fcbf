"""Consumer-side deduplication in the consumer's own database transaction (SQLAlchemy 2.x).

Brokers deliver at least once: a redelivery after a crash, a rebalance or a lost ack hands the same
message to the consumer again. :meth:`Deduplicator.process_once` inserts the message's key into a table
**inside the consumer's business transaction**; if the key is already there it returns ``False`` and the
consumer skips the work. Because the key and the business change commit (or roll back) together, each
key's work is applied exactly once, even with concurrent duplicate deliveries:

* PostgreSQL and SQLite: ``INSERT ... ON CONFLICT DO NOTHING``. On PostgreSQL a concurrent insert of the
  same key waits for the other transaction: if it commits, this one sees the conflict (``False``); if it
  rolls back, this one inserts (``True``). SQLite serialises writers with its database lock.
* Other dialects: the insert runs in a SAVEPOINT and a unique violation is caught (so the caller's
  transaction stays usable).

Table ``txmq_processed`` (name configurable): ``consumer_group`` + ``dedup_key`` (primary key),
``processed_at_ms`` (epoch ms from the injected clock).
"""

from __future__ import annotations

from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, CursorResult, Engine
from sqlalchemy.orm import Session

from txmq.common import errors
from txmq.common.clock import Clock, SystemClock

DEFAULT_TABLE: Final = "txmq_processed"
KEY_LENGTH_MAX: Final = 512

Executor = Session | Connection


class Deduplicator:
    """Remembers processed keys of one consumer group; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        table_name: str = DEFAULT_TABLE,
        *,
        consumer_group: str = "",
        clock: Clock | None = None,
        schema: str | None = None,
    ) -> None:
        self.engine = engine
        self.consumer_group = consumer_group
        self.clock: Clock = clock or SystemClock()
        self.metadata = sa.MetaData(schema=schema)
        self.table = sa.Table(
            table_name,
            self.metadata,
            sa.Column("consumer_group", sa.String(255), primary_key=True),
            sa.Column("dedup_key", sa.String(KEY_LENGTH_MAX), primary_key=True),
            sa.Column("processed_at_ms", sa.BigInteger, nullable=False, index=True),
        )

    def create_schema(self) -> None:
        self.metadata.create_all(self.engine)

    def drop_schema(self) -> None:
        self.metadata.drop_all(self.engine)

    def process_once(self, executor: Executor, key: str) -> bool:
        """Claim ``key`` inside the caller's open transaction; ``False`` if it was already processed.

        Typical use, with the message id or business key as ``key``::

            with Session(engine) as session, session.begin():
                if dedup.process_once(session, msg.message_id):
                    apply_business_change(session, msg)
        """
        if not key or len(key) > KEY_LENGTH_MAX:
            raise errors.InvalidArgument(
                f"dedup key {key[:64]!r} is empty or over {KEY_LENGTH_MAX} characters"
            )
        values = {
            "consumer_group": self.consumer_group,
            "dedup_key": key,
            "processed_at_ms": self.clock.now_ms(),
        }
        dialect = self.engine.dialect.name
        if dialect in ("postgresql", "sqlite"):
            insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
            stmt = insert(self.table).values(**values).on_conflict_do_nothing()
            result: CursorResult[Any] = executor.execute(stmt)  # type: ignore[assignment]
            return int(result.rowcount) == 1
        return self._insert_in_savepoint(executor, values)

    def _insert_in_savepoint(self, executor: Executor, values: dict[str, Any]) -> bool:
        savepoint = executor.begin_nested()
        try:
            executor.execute(self.table.insert().values(**values))
        except sa_exc.IntegrityError:
            savepoint.rollback()
            return False
        savepoint.commit()
        return True

    def seen(self, key: str) -> bool:
        """Whether ``key`` was processed (committed), read in a transaction of its own."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(sa.literal(1)).where(
                    self.table.c.consumer_group == self.consumer_group, self.table.c.dedup_key == key
                )
            ).first()
        return row is not None

    def cleanup(self, older_than_s: float) -> int:
        """Forget keys processed more than ``older_than_s`` ago (keep longer than any redelivery window)."""
        cutoff = self.clock.now_ms() - round(older_than_s * 1000)
        with self.engine.begin() as conn:
            result: CursorResult[Any] = conn.execute(
                self.table.delete().where(
                    self.table.c.consumer_group == self.consumer_group, self.table.c.processed_at_ms < cutoff
                )
            )
            return int(result.rowcount)
