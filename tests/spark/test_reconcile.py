"""Reconciliation finds each planted discrepancy and nothing else: SQLite ledgers through Python, a
PostgreSQL ledger through the JDBC jar (via the CLI, which starts its own session with spark.jars), and
the broker's topic through the ``txmq`` source."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.client.broker import BrokerProcess
from tests.conftest import PYTHON, subprocess_env
from tests.spark.conftest import new_topic
from txmq.client import BlockingProducer, Message
from txmq.demo import bank
from txmq.spark.reconcile import CREDITS, DEBITS, discrepancies, load_ledger, published_ids, reconcile

GOOD = [f"t{i}" for i in range(1, 6)]
# id -> (debit amount or None, credit amounts, times published)
PLANTED: dict[str, tuple[int | None, list[int], int]] = {
    **{t: (10, [10], 1) for t in GOOD},
    "t6": (10, [], 1),  # debited, published, never credited
    "t7": (10, [10, 10], 1),  # credited twice
    "t8": (None, [10], 0),  # credited without a debit
    "t9": (10, [11], 1),  # amounts disagree
    "t10": (10, [10], 0),  # debited and credited but never published
    "t11": (None, [], 1),  # published without a debit (its local transaction rolled back)
    "t12": (10, [10], 2),  # published twice
}
EXPECTED = {
    "DEBITED_NOT_CREDITED": ["t6"],
    "CREDITED_TWICE": ["t7"],
    "CREDITED_WITHOUT_DEBIT": ["t8"],
    "AMOUNT_MISMATCH": ["t9"],
    "DEBITED_NOT_PUBLISHED": ["t10"],
    "PUBLISHED_WITHOUT_DEBIT": ["t11"],
    "PUBLISHED_TWICE": ["t12"],
}


def _ledgers(root: Path) -> tuple[str, str]:
    a, b = root / "a.db", root / "b.db"
    engine_a, engine_b = sa.create_engine(f"sqlite:///{a}"), sa.create_engine(f"sqlite:///{b}")
    bank.create(engine_a, engine_b)
    with engine_a.begin() as conn:
        for tid, (debit, _credits, _n) in PLANTED.items():
            if debit is not None:
                conn.execute(bank.a_transfers.insert().values(transfer_id=tid, amount=debit))
    with engine_b.begin() as conn:
        for tid, (_debit, credits, _n) in PLANTED.items():
            for amount in credits:
                conn.execute(bank.b_credits.insert().values(transfer_id=tid, amount=amount))
    engine_a.dispose()
    engine_b.dispose()
    return f"sqlite:///{a}", f"sqlite:///{b}"


def _publish(broker: BrokerProcess) -> str:
    topic = new_topic(broker, queues=2)
    with BlockingProducer(broker.namesrv, group="recon") as producer:
        for tid, (_debit, _credits, times) in PLANTED.items():
            for _ in range(times):
                producer.send(Message(topic, json.dumps({"id": tid}).encode(), keys=(tid,)))
        for _ in range(2):  # no key, so no transfer id: published without a debit, not "published twice"
            producer.send(Message(topic, b"{}"))
    return topic


def _found(report: Any) -> dict[str, list[str]]:
    return {
        kind.value: sorted(str(e["transfer_id"]) for e in entry.examples)
        for kind, entry in report.classes.items()
        if entry.count
    }


def test_reconcile_finds_each_planted_discrepancy(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    debits_url, credits_url = _ledgers(tmp_path)
    topic = _publish(spark_broker)
    debits, credits = load_ledger(spark, debits_url, DEBITS), load_ledger(spark, credits_url, CREDITS)
    report = reconcile(debits, credits, published_ids(spark, spark_broker.namesrv, topic))
    assert _found(report) == {**EXPECTED, "PUBLISHED_WITHOUT_DEBIT": ["None", "t11"]}
    assert (report.debits, report.credits, report.published) == (10, 11, 13)
    clean = debits.where("transfer_id in ('t1', 't2')")
    assert reconcile(clean, credits.where("transfer_id in ('t1', 't2')")).clean
    rows = discrepancies(debits, credits).where("kind = 'CREDITED_TWICE'").collect()
    assert [(r.transfer_id, r.debits, r.credits) for r in rows] == [("t7", 1, 2)]


@pytest.mark.postgres
@pytest.mark.slow  # a second JVM: the CLI starts its own SparkSession with the JDBC jar
def test_cli_reconcile_postgres_json_and_exit_codes(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    psycopg2 = pytest.importorskip("psycopg2")
    if not os.path.exists("/usr/share/java/postgresql.jar"):
        pytest.skip("the PostgreSQL JDBC jar is missing: apt-get install libpostgresql-jdbc-java")
    debits_url, _ = _ledgers(tmp_path)
    topic = _publish(spark_broker)
    table = f"recon_credits_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect(host="127.0.0.1", user="postgres", dbname="test")
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {table} (row_id serial, transfer_id varchar(64), amount bigint)")
            for tid, (_debit, credits, _n) in PLANTED.items():
                for amount in credits:
                    cur.execute(f"INSERT INTO {table} (transfer_id, amount) VALUES (%s, %s)", (tid, amount))
        home = tmp_path / "home"
        home.mkdir()
        command = [
            PYTHON, "-m", "txmq", "pipeline", "reconcile", "--debits", debits_url,
            "--credits", "postgresql://postgres@127.0.0.1:5432/test", "--credits-table", table,
            "--endpoints", spark_broker.namesrv, "--topic", topic, "--json",
        ]  # fmt: skip
        done = subprocess.run(command, env=subprocess_env(home), capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stderr[-3000:]
        report = json.loads(done.stdout)
        found = {
            k: sorted(str(e["transfer_id"]) for e in v["examples"])
            for k, v in report["discrepancies"].items()
        }
        assert found == {**EXPECTED, "PUBLISHED_WITHOUT_DEBIT": ["None", "t11"]}
        assert report["compared"] == {"debits": 10, "credits": 11, "published": 13}
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()
    bad = subprocess.run(
        [PYTHON, "-m", "txmq", "pipeline", "reconcile", "--debits", "mysql://x/y", "--credits", debits_url],
        env=subprocess_env(home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "sqlite:" in bad.stderr
