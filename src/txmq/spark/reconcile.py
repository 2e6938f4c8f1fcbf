"""Reconciliation (对账) on Spark: compare the producer's ledger (debits), the consumer's ledger (credits)
and, optionally, the broker's topic, and name every transfer that does not add up.

::

    from txmq.spark.reconcile import discrepancies, load_ledger, published_ids, reconcile
    debits = load_ledger(spark, "sqlite:////data/bank_a.db", DEBITS)
    credits = load_ledger(spark, "postgresql://bank@127.0.0.1/bank_b", CREDITS)  # spark.jars: postgresql.jar
    published = published_ids(spark, "127.0.0.1:9876", "transfers")
    report = reconcile(debits, credits, published)   # a ReconcileReport; report.clean, report.to_json()
    discrepancies(debits, credits, published).show()  # or the raw rows: kind, transfer_id, counts, amounts

Each ledger is any DataFrame with a ``transfer_id`` and (optionally) an ``amount`` column (rename yours,
or pass a :class:`LedgerLayout`). Rows are joined on the business key, never on offsets: a retried or
delayed message has a new offset but the same key. The classes are in :class:`Discrepancy`.
"""

from __future__ import annotations

import sqlite3

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from txmq.common import errors
from txmq.spark.reconcile_report import (
    CREDITS,
    DEBITS,
    PUBLISHED_ID_DEFAULT,
    Discrepancy,
    LedgerLayout,
    ReconcileReport,
    build_report,
    parse_ledger_url,
)

__all__ = [
    "CREDITS",
    "DEBITS",
    "Discrepancy",
    "LedgerLayout",
    "ReconcileReport",
    "discrepancies",
    "load_ledger",
    "published_ids",
    "reconcile",
]

_LEDGER = StructType([StructField("transfer_id", StringType()), StructField("amount", LongType())])


def load_ledger(spark: SparkSession, url: str, layout: LedgerLayout) -> DataFrame:
    """A ledger as ``transfer_id STRING, amount BIGINT`` (amount null when the layout has none)."""
    source = parse_ledger_url(url)
    amount = layout.amount_column
    if source.kind == "sqlite":
        columns = f'"{layout.id_column}", ' + (f'"{amount}"' if amount else "NULL")
        try:
            with sqlite3.connect(f"file:{source.path}?mode=ro", uri=True) as conn:
                rows = conn.execute(f'SELECT {columns} FROM "{layout.table}"').fetchall()
        except sqlite3.Error as exc:
            raise errors.InvalidArgument(f"cannot read {layout.table} from {url}: {exc}") from None
        typed = [(None if i is None else str(i), None if a is None else int(a)) for i, a in rows]
        return spark.createDataFrame(typed, _LEDGER)
    reader = (
        spark.read.format("jdbc").option("url", source.jdbc_url).option("dbtable", layout.table)
        .option("driver", "org.postgresql.Driver")
    )  # fmt: skip
    if source.user:
        reader = reader.option("user", source.user)
    if source.password:
        reader = reader.option("password", source.password)
    return as_ledger(reader.load(), layout)


def as_ledger(df: DataFrame, layout: LedgerLayout) -> DataFrame:
    """Any DataFrame in the ledger shape ``transfer_id STRING, amount BIGINT``."""
    amount = (
        F.col(layout.amount_column).cast("bigint") if layout.amount_column else F.lit(None).cast("bigint")
    )
    return df.select(F.col(layout.id_column).cast("string").alias("transfer_id"), amount.alias("amount"))


def published_ids(
    spark: SparkSession, endpoints: str, topic: str, id_expr: str = PUBLISHED_ID_DEFAULT
) -> DataFrame:
    """The transfer id of every message in ``topic`` now (a batch read through the ``txmq`` source)."""
    df = (
        spark.read.format("txmq").option("endpoints", endpoints).option("topic", topic)
        .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
    )  # fmt: skip
    return df.select(F.expr(id_expr).cast("string").alias("transfer_id"))


def _joined(debits: DataFrame, credits: DataFrame, published: DataFrame | None) -> DataFrame:
    """One row per transfer id with its count (and sum) on each side."""
    d = debits.groupBy("transfer_id").agg(
        F.count("*").alias("debits"), F.sum("amount").alias("debited_amount")
    )
    c = credits.groupBy("transfer_id").agg(
        F.count("*").alias("credits"), F.max("amount").alias("credited_amount")
    )
    joined = d.join(c, "transfer_id", "full_outer")
    if published is not None:
        p = published.groupBy("transfer_id").agg(F.count("*").alias("published"))
        return joined.join(p, "transfer_id", "full_outer")
    return joined.withColumn("published", F.lit(None).cast("bigint"))


def _classified(joined: DataFrame, compare_broker: bool) -> DataFrame:
    n_d, n_c, n_p = (F.coalesce(F.col(c), F.lit(0)) for c in ("debits", "credits", "published"))
    broker = F.lit(compare_broker)
    # Rows with no transfer id (a message without keys) are grouped under null: "twice" would claim
    # they are one transfer repeated; they only lack a counterpart.
    known = F.col("transfer_id").isNotNull()
    rules = [
        (Discrepancy.DEBITED_NOT_CREDITED, (n_d > 0) & (n_c == 0)),
        (Discrepancy.CREDITED_TWICE, known & (n_c > 1)),
        (Discrepancy.CREDITED_WITHOUT_DEBIT, (n_c > 0) & (n_d == 0)),
        (
            Discrepancy.AMOUNT_MISMATCH,
            (n_d > 0) & (n_c > 0) & (F.col("debited_amount") != F.col("credited_amount")),
        ),
        (Discrepancy.DEBITED_NOT_PUBLISHED, broker & (n_d > 0) & (n_p == 0)),
        (Discrepancy.PUBLISHED_WITHOUT_DEBIT, broker & (n_p > 0) & (n_d == 0)),
        (Discrepancy.PUBLISHED_TWICE, broker & known & (n_p > 1)),
    ]
    kinds = F.array(*(F.when(rule, F.lit(kind.value)) for kind, rule in rules))
    return (
        joined.withColumn("kind", F.explode(F.array_compact(kinds)))
        .select(
            "kind", "transfer_id", n_d.alias("debits"), n_c.alias("credits"),
            F.col("published").cast("bigint").alias("published"), "debited_amount", "credited_amount",
        )
    )  # fmt: skip


def discrepancies(debits: DataFrame, credits: DataFrame, published: DataFrame | None = None) -> DataFrame:
    """One row per (class, transfer id): ``kind, transfer_id, debits, credits, published, debited_amount,
    credited_amount`` (counts of rows on each side; ``published`` null when the topic was not given)."""
    return _classified(_joined(debits, credits, published), published is not None)


def reconcile(
    debits: DataFrame, credits: DataFrame, published: DataFrame | None = None, *, examples: int = 5
) -> ReconcileReport:
    """Count each discrepancy class and keep ``examples`` of each (smallest transfer ids). Each input is
    read once (the per-id join is cached), which matters for the broker's topic."""
    joined = _joined(debits, credits, published).cache()
    try:
        totals = joined.agg(
            *(F.coalesce(F.sum(c), F.lit(0)).alias(c) for c in ("debits", "credits", "published"))
        ).first()
        found = _classified(joined, published is not None)
        ranked = found.withColumn(
            "_rank", F.row_number().over(Window.partitionBy("kind").orderBy("transfer_id"))
        ).withColumn("_count", F.count("*").over(Window.partitionBy("kind")))
        sample = ranked.where(F.col("_rank") <= max(examples, 1)).collect()
    finally:
        joined.unpersist()
    assert totals is not None  # an aggregate without grouping has exactly one row
    counts = {r["kind"]: int(r["_count"]) for r in sample}
    rows = [r.asDict() for r in sample if r["_rank"] <= examples]
    for row in rows:
        del row["_rank"], row["_count"]
    return build_report(
        counts, rows, debits=int(totals["debits"]), credits=int(totals["credits"]),
        published=None if published is None else int(totals["published"]),
    )  # fmt: skip
