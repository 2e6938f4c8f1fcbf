"""Reconciliation (对账) vocabulary and its report, without Spark: the discrepancy classes, the ledger
layout, where ledgers come from, and the counted, JSON-able outcome the CLI prints and exits on."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from txmq.common import errors


class Discrepancy(enum.Enum):
    """One transfer id can fall in several classes (say, published twice and credited twice)."""

    DEBITED_NOT_CREDITED = "DEBITED_NOT_CREDITED"  # money left bank A and never reached bank B
    CREDITED_TWICE = "CREDITED_TWICE"  # bank B paid more than once
    CREDITED_WITHOUT_DEBIT = "CREDITED_WITHOUT_DEBIT"  # bank B paid what bank A never debited
    AMOUNT_MISMATCH = "AMOUNT_MISMATCH"  # both sides know the transfer but disagree on the sum
    DEBITED_NOT_PUBLISHED = "DEBITED_NOT_PUBLISHED"  # debit committed, its message never visible
    PUBLISHED_WITHOUT_DEBIT = "PUBLISHED_WITHOUT_DEBIT"  # a visible message whose debit rolled back
    PUBLISHED_TWICE = "PUBLISHED_TWICE"  # the message is in the topic more than once


BROKER_CLASSES = frozenset(
    {Discrepancy.DEBITED_NOT_PUBLISHED, Discrepancy.PUBLISHED_WITHOUT_DEBIT, Discrepancy.PUBLISHED_TWICE}
)


@dataclass(frozen=True, slots=True)
class LedgerLayout:
    """Which table and columns hold a ledger; the defaults are the transfer demo's (``demo/bank.py``)."""

    table: str
    id_column: str = "transfer_id"
    amount_column: str | None = "amount"


DEBITS = LedgerLayout("a_transfers")
CREDITS = LedgerLayout("b_credits")
PUBLISHED_ID_DEFAULT = "split(keys, ' ')[0]"  # the demo's message key is the transfer id


@dataclass(frozen=True, slots=True)
class LedgerSource:
    """Where a ledger lives: ``sqlite:////abs/path.db`` (SQLAlchemy's URL) (read through Python's sqlite3) or
    ``postgresql://user[:password]@host[:port]/db`` (read through Spark's JDBC with the PostgreSQL jar)."""

    kind: str  # "sqlite" | "postgresql"
    path: str = ""  # sqlite
    jdbc_url: str = ""  # postgresql
    user: str = ""
    password: str = ""


def parse_ledger_url(url: str) -> LedgerSource:
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)[1:]  # SQLAlchemy's form: sqlite:///relative.db, sqlite:////abs.db
        if parsed.netloc or not path:
            raise errors.InvalidArgument(f"{url!r}: write a SQLite ledger as sqlite:////absolute/path.db")
        return LedgerSource("sqlite", path=path)
    if parsed.scheme in ("postgresql", "postgres"):
        host = parsed.hostname or "127.0.0.1"
        port = parsed.port or 5432
        database = parsed.path.lstrip("/")
        if not database:
            raise errors.InvalidArgument(f"{url!r}: name the database, postgresql://user@host:5432/db")
        return LedgerSource(
            "postgresql", jdbc_url=f"jdbc:postgresql://{host}:{port}/{database}",
            user=unquote(parsed.username or ""), password=unquote(parsed.password or ""),
        )  # fmt: skip
    raise errors.InvalidArgument(f"{url!r}: a ledger is sqlite:///file.db or postgresql://user@host/db")


@dataclass(slots=True)
class ClassReport:
    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class ReconcileReport:
    """Counts and a few examples per discrepancy class, plus the sizes of what was compared."""

    debits: int = 0
    credits: int = 0
    published: int | None = None  # None: the broker's topic was not compared
    classes: dict[Discrepancy, ClassReport] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not any(c.count for c in self.classes.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "compared": {"debits": self.debits, "credits": self.credits, "published": self.published},
            "discrepancies": {
                kind.value: {"count": report.count, "examples": report.examples}
                for kind, report in sorted(self.classes.items(), key=lambda kv: kv[0].value)
                if report.count
            },
        }

    def lines(self) -> list[str]:
        compared = f"compared {self.debits} debits, {self.credits} credits"
        if self.published is not None:
            compared += f", {self.published} published messages"
        if self.clean:
            return [compared, "no discrepancy"]
        out = [compared]
        for kind, report in sorted(self.classes.items(), key=lambda kv: kv[0].value):
            if report.count:
                shown = ", ".join(str(e["transfer_id"]) for e in report.examples)
                out.append(f"{kind.value}: {report.count} (e.g. {shown})")
        return out


def build_report(
    counts: Mapping[str, int],
    examples: Iterable[Mapping[str, Any]],
    *,
    debits: int,
    credits: int,
    published: int | None,
) -> ReconcileReport:
    """Counts per class and example rows ``{"kind", "transfer_id", ...}`` (already limited per class)
    into a report; examples sorted by id, so the output is stable from run to run."""
    report = ReconcileReport(debits=debits, credits=credits, published=published)
    for kind, count in counts.items():
        report.classes[Discrepancy(kind)] = ClassReport(count=int(count))
    for row in sorted(examples, key=lambda r: (str(r["kind"]), str(r["transfer_id"]))):
        report.classes.setdefault(Discrepancy(str(row["kind"])), ClassReport()).examples.append(dict(row))
    return report
