"""``txmq pipeline reconcile`` and ``txmq pipeline resolve``: the Spark pipeline's operator commands.

``reconcile`` starts a local SparkSession (``--master``), loads the two ledgers and the broker's topic,
prints each discrepancy class with counts and examples (``--json`` for data) and exits 1 when it found
any (0 when the books balance, 2 when it could not run). ``resolve`` answers the exactly-once sink's
check-backs from its marker log until interrupted, for orphans left by a query that is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Annotated, Any

import typer

from txmq.cli.common import fail, print_json
from txmq.common import errors

POSTGRES_JAR = "/usr/share/java/postgresql.jar"

pipeline_app = typer.Typer(
    help="The Spark pipeline: reconciliation and the sink's resolver.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(pipeline_app, name="pipeline")


def _session(master: str, jars: list[str]) -> Any:
    from txmq.spark import SparkUnavailable, register, require_spark

    try:
        require_spark()
    except SparkUnavailable as exc:
        fail(str(exc), 2)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master).appName("txmq-reconcile")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4").config("spark.driver.bindAddress", "127.0.0.1")
    )  # fmt: skip
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


@pipeline_app.command("reconcile")
def reconcile_cmd(
    debits: Annotated[
        str, typer.Option(help="producer ledger: sqlite:////abs/a.db or postgresql://user@host/db")
    ],
    credits: Annotated[str, typer.Option(help="consumer ledger, same forms")],
    debits_table: Annotated[str, typer.Option(help="table of debits")] = "a_transfers",
    credits_table: Annotated[str, typer.Option(help="table of credits")] = "b_credits",
    id_column: Annotated[str, typer.Option(help="the transfer id column in both ledgers")] = "transfer_id",
    amount_column: Annotated[str, typer.Option(help="amount column ('' for none)")] = "amount",
    endpoints: Annotated[str | None, typer.Option(help="name server: compare the topic too")] = None,
    topic: Annotated[str, typer.Option(help="the topic the producer publishes transfers to")] = "transfers",
    published_id: Annotated[str, typer.Option(help="Spark SQL giving a message's transfer id")] = (
        "split(keys, ' ')[0]"
    ),
    examples: Annotated[int, typer.Option(min=0, help="examples shown per class")] = 5,
    master: Annotated[str, typer.Option(help="Spark master")] = "local[2]",
    jdbc_jar: Annotated[str, typer.Option(help="PostgreSQL JDBC jar (Debian: libpostgresql-jdbc-java)")] = (
        POSTGRES_JAR
    ),
    json_out: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Compare debits, credits and the broker's topic; exit 1 when anything does not add up."""
    from txmq.spark.reconcile_report import LedgerLayout, parse_ledger_url

    try:
        sources = [parse_ledger_url(debits), parse_ledger_url(credits)]
    except errors.TxmqError as exc:
        fail(str(exc), 2)
    for source, url in zip(sources, (debits, credits), strict=True):
        if source.kind == "sqlite" and not os.path.isfile(source.path):
            # before Spark starts (~45 s): a mistyped path is a one-line error at once
            fail(f"no SQLite ledger at {source.path} (from {url})", 2)
    jars = []
    if any(s.kind == "postgresql" for s in sources):
        if not os.path.exists(jdbc_jar):
            fail(
                f"a PostgreSQL ledger needs {jdbc_jar} (apt-get install libpostgresql-jdbc-java)",
                2,
            )
        jars.append(jdbc_jar)
    spark = _session(master, jars)
    from txmq.spark.reconcile import load_ledger, published_ids, reconcile

    amount = amount_column or None
    try:
        report = reconcile(
            load_ledger(spark, debits, LedgerLayout(debits_table, id_column, amount)),
            load_ledger(spark, credits, LedgerLayout(credits_table, id_column, amount)),
            published_ids(spark, endpoints, topic, published_id) if endpoints else None,
            examples=examples,
        )
    except errors.TxmqError as exc:
        fail(str(exc), 2)
    except Exception as exc:  # noqa: BLE001 - Spark's errors (JDBC, SQL) become one line and exit 2
        fail(f"reconciliation failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", 2)
    finally:
        spark.stop()
    if json_out:
        print_json(report.to_json())
    else:
        for line in report.lines():
            print(line)
    raise typer.Exit(0 if report.clean else 1)


@pipeline_app.command("resolve")
def resolve_cmd(
    sink_id: Annotated[str, typer.Option(help="option sinkId, or the one derived from the checkpoint")],
    endpoints: Annotated[str, typer.Option(help="name server")] = "127.0.0.1:9876",
) -> None:
    """Answer the sink's check-backs from its marker log until SIGINT/SIGTERM."""
    from txmq.spark.sink_log import run_resolver
    from txmq.spark.sink_plan import SinkOptions

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        print(f"resolving check-backs for sink {sink_id}", flush=True)
        await run_resolver(SinkOptions(endpoints, None, sink_id), stop)

    try:
        asyncio.run(main())
    except errors.TxmqError as exc:
        fail(str(exc), 2)
