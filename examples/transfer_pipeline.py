"""The transfer demo's topic, streamed into partitioned Parquet with per-account aggregates.

::

    python examples/transfer_pipeline.py --endpoints 127.0.0.1:9876 --topic transfers --out ./lake
    # stop it any time (Ctrl-C, or a crash) and start it again: it resumes from ./lake/_checkpoints

Two streaming queries over the ``txmq`` source:

* ``transfers``: every committed transfer message (body ``{"id", "from", "to", "amount"}``) as a row in
  ``<out>/transfers/``, partitioned by ``from_account``. Spark's file sink records each batch in
  ``_spark_metadata``, so after a crash and restart every message is there exactly once (read it back
  through Spark, which honours that log);
* ``accounts``: per-account totals (sent, received, net, transfers) kept as streaming state in the
  checkpoint and rewritten whole to ``<out>/accounts/`` after each batch, so a re-run batch rewrites the
  same answer.

Only committed transactional messages are ever in the topic (half messages live in a system topic), so
rolled-back transfers never reach the lake.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

SCHEMA = "id STRING, `from` INT, `to` INT, amount BIGINT"


def transfers(spark: Any, endpoints: str, topic: str) -> Any:
    """The topic as typed transfer rows (plus where each came from in the broker)."""
    raw = (
        spark.readStream.format("txmq").option("endpoints", endpoints).option("topic", topic)
        .option("startingOffsets", "earliest").load()
    )  # fmt: skip
    return raw.selectExpr(
        f"from_json(cast(body as string), '{SCHEMA}') as t", "queue_id", "queue_offset", "store_timestamp"
    ).selectExpr(
        "t.id as transfer_id", "t.`from` as from_account", "t.`to` as to_account", "t.amount as amount",
        "queue_id", "queue_offset", "store_timestamp",
    )  # fmt: skip


def start(spark: Any, endpoints: str, topic: str, out: str, *, available_now: bool = False) -> list[Any]:
    """Start both queries; each has its own checkpoint under ``<out>/_checkpoints``."""
    rows = transfers(spark, endpoints, topic)
    trigger = {"availableNow": True} if available_now else {"processingTime": "2 seconds"}
    lake = (
        rows.writeStream.format("parquet").partitionBy("from_account")
        .option("path", os.path.join(out, "transfers"))
        .option("checkpointLocation", os.path.join(out, "_checkpoints", "transfers"))
        .trigger(**trigger).start()
    )  # fmt: skip
    legs = rows.selectExpr(
        "stack(2, from_account, -amount, amount, 0L, to_account, amount, 0L, amount) "
        "as (account, net, sent, received)"
    )
    totals = (
        legs.groupBy("account")
        .agg({"net": "sum", "sent": "sum", "received": "sum", "account": "count"})
        .withColumnsRenamed(
            {"sum(net)": "net", "sum(sent)": "sent", "sum(received)": "received", "count(account)": "legs"}
        )
    )
    accounts_path = os.path.join(out, "accounts")

    def overwrite(batch: Any, _batch_id: int) -> None:
        batch.coalesce(1).write.mode("overwrite").parquet(accounts_path)

    accounts = (
        totals.writeStream.outputMode("complete").foreachBatch(overwrite)
        .option("checkpointLocation", os.path.join(out, "_checkpoints", "accounts"))
        .trigger(**trigger).start()
    )  # fmt: skip
    return [lake, accounts]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--endpoints", default="127.0.0.1:9876", help="the txmq name server")
    parser.add_argument("--topic", default="transfers")
    parser.add_argument("--out", default="./lake", help="where the Parquet tables and checkpoints go")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then exit")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import txmq.spark

    spark = (
        SparkSession.builder.master("local[2]").appName("txmq-transfer-pipeline")
        .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )  # fmt: skip
    txmq.spark.register(spark)
    queries = start(
        spark, args.endpoints, args.topic, os.path.abspath(args.out), available_now=args.available_now
    )
    try:
        for query in queries:
            query.awaitTermination()
    except KeyboardInterrupt:
        for query in queries:
            query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
