"""The two banks of the transfer demo: their tables, and the invariants checked at the end.

Bank A debits an account and records the transfer in ``a_transfers`` in the same database transaction
as the transaction-table row (so check-back can answer from it). Bank B credits: one ``b_credits`` row
per credit (deliberately without a unique key, so a double credit would show), guarded by the
consumer dedup table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

ACCOUNTS = 10
OPENING_BALANCE = 1_000

metadata = sa.MetaData()
a_accounts = sa.Table(
    "a_accounts", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("balance", sa.BigInteger)
)
a_transfers = sa.Table(
    "a_transfers",
    metadata,
    sa.Column("transfer_id", sa.String(64), primary_key=True),
    sa.Column("from_account", sa.Integer),
    sa.Column("to_account", sa.Integer),
    sa.Column("amount", sa.BigInteger),
    sa.Column("debited_at_ms", sa.BigInteger),
)
b_accounts = sa.Table(
    "b_accounts", metadata, sa.Column("id", sa.Integer, primary_key=True), sa.Column("balance", sa.BigInteger)
)
b_credits = sa.Table(
    "b_credits",
    metadata,
    sa.Column("row_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("transfer_id", sa.String(64), index=True),
    sa.Column("to_account", sa.Integer),
    sa.Column("amount", sa.BigInteger),
    sa.Column("credited_at_ms", sa.BigInteger),
)


class InsufficientFunds(Exception):
    """The debit would overdraw the account: the local transaction rolls back."""


def create(engine_a: sa.Engine, engine_b: sa.Engine) -> None:
    """Fresh tables with every account at the opening balance."""
    for engine, accounts, tables in (
        (engine_a, a_accounts, [a_accounts, a_transfers]),
        (engine_b, b_accounts, [b_accounts, b_credits]),
    ):
        metadata.drop_all(engine, tables=tables)
        metadata.create_all(engine, tables=tables)
        with engine.begin() as conn:
            conn.execute(accounts.insert(), [{"id": i, "balance": OPENING_BALANCE} for i in range(ACCOUNTS)])


def debit(session: Any, transfer: dict[str, Any], now_ms: int) -> None:
    """Bank A's local transaction (runs inside the caller's database transaction)."""
    updated = session.execute(
        a_accounts.update()
        .where(a_accounts.c.id == transfer["from"], a_accounts.c.balance >= transfer["amount"])
        .values(balance=a_accounts.c.balance - transfer["amount"])
    )
    if updated.rowcount != 1:
        raise InsufficientFunds(f"account {transfer['from']} cannot pay {transfer['amount']}")
    session.execute(
        a_transfers.insert().values(
            transfer_id=transfer["id"], from_account=transfer["from"], to_account=transfer["to"],
            amount=transfer["amount"], debited_at_ms=now_ms,
        )
    )  # fmt: skip


def credit(session: Any, transfer: dict[str, Any], now_ms: int) -> None:
    """Bank B's side (runs inside the consumer's database transaction, after the dedup claim)."""
    session.execute(
        b_accounts.update()
        .where(b_accounts.c.id == transfer["to"])
        .values(balance=b_accounts.c.balance + transfer["amount"])
    )
    session.execute(
        b_credits.insert().values(
            transfer_id=transfer["id"],
            to_account=transfer["to"],
            amount=transfer["amount"],
            credited_at_ms=now_ms,
        )
    )


@dataclass
class Verdict:
    """What the run proved (or broke)."""

    debited: int = 0
    credited: int = 0
    money_before: int = 0
    money_after: int = 0
    not_credited: list[str] = field(default_factory=list)
    credited_twice: list[str] = field(default_factory=list)
    credited_without_debit: list[str] = field(default_factory=list)

    @property
    def conserved(self) -> bool:
        return self.money_before == self.money_after

    @property
    def ok(self) -> bool:
        return self.conserved and not (
            self.not_credited or self.credited_twice or self.credited_without_debit
        )


def verdict(engine_a: sa.Engine, engine_b: sa.Engine) -> Verdict:
    with engine_a.connect() as conn:
        money_a = int(
            conn.execute(sa.select(sa.func.coalesce(sa.func.sum(a_accounts.c.balance), 0))).scalar_one()
        )
        debits = {row.transfer_id for row in conn.execute(sa.select(a_transfers.c.transfer_id))}
    with engine_b.connect() as conn:
        money_b = int(
            conn.execute(sa.select(sa.func.coalesce(sa.func.sum(b_accounts.c.balance), 0))).scalar_one()
        )
        rows = conn.execute(
            sa.select(b_credits.c.transfer_id, sa.func.count()).group_by(b_credits.c.transfer_id)
        ).all()
    credits = {str(transfer_id): int(count) for transfer_id, count in rows}
    return Verdict(
        debited=len(debits),
        credited=len(credits),
        money_before=2 * ACCOUNTS * OPENING_BALANCE,
        money_after=money_a + money_b,
        not_credited=sorted(debits - credits.keys()),
        credited_twice=sorted(t for t, n in credits.items() if n > 1),
        credited_without_debit=sorted(credits.keys() - debits),
    )


def credit_times(engine_b: sa.Engine, transfer_ids: list[str]) -> dict[str, int]:
    if not transfer_ids:
        return {}
    with engine_b.connect() as conn:
        rows = conn.execute(
            sa.select(b_credits.c.transfer_id, sa.func.min(b_credits.c.credited_at_ms))
            .where(b_credits.c.transfer_id.in_(transfer_ids))
            .group_by(b_credits.c.transfer_id)
        ).all()
    return {str(t): int(ms) for t, ms in rows}
