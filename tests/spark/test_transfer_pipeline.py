"""The example pipeline (examples/transfer_pipeline.py) runs, stops, and resumes from its checkpoint:
every committed transfer lands in the Parquet lake exactly once and the per-account totals add up."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from tests.client.broker import BrokerProcess
from tests.conftest import REPO
from tests.spark.conftest import new_topic
from txmq.client import BlockingProducer, BlockingTransactionProducer, LocalTransactionState, Message


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "transfer_pipeline", REPO / "examples" / "transfer_pipeline.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Decide:
    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        return arg  # type: ignore[no-any-return]

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.ROLLBACK_MESSAGE


def _send(broker: BrokerProcess, topic: str, transfers: list[tuple[str, int, int, int]]) -> None:
    with BlockingProducer(broker.namesrv, group="pipefeed") as producer:
        for tid, src, dst, amount in transfers:
            body = json.dumps({"id": tid, "from": src, "to": dst, "amount": amount}).encode()
            producer.send(Message(topic, body, keys=(tid,)))


def _run(spark: Any, module: Any, broker: BrokerProcess, topic: str, out: Path) -> None:
    for query in module.start(spark, broker.namesrv, topic, str(out), available_now=True):
        query.awaitTermination(180)
        assert query.exception() is None


def test_pipeline_restarts_from_its_checkpoint(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path
) -> None:
    module, topic, out = _example(), new_topic(spark_broker, queues=2), tmp_path / "lake"
    _send(spark_broker, topic, [(f"x{i}", i % 3, (i + 1) % 3, 10 + i) for i in range(6)])
    with BlockingTransactionProducer("pipe-tx", _Decide(), spark_broker.namesrv) as producer:
        body = json.dumps({"id": "rolled-back", "from": 0, "to": 1, "amount": 999}).encode()
        producer.send_message_in_transaction(Message(topic, body), LocalTransactionState.ROLLBACK_MESSAGE)
    _run(spark, module, spark_broker, topic, out)
    _send(spark_broker, topic, [(f"y{i}", 2, 0, 1) for i in range(4)])
    _run(spark, module, spark_broker, topic, out)  # a new run on the same checkpoints

    lake = spark.read.parquet(str(out / "transfers"))
    ids = sorted(r.transfer_id for r in lake.select("transfer_id").collect())
    assert ids == sorted([f"x{i}" for i in range(6)] + [f"y{i}" for i in range(4)])
    assert {p.name.split("=")[0] for p in (out / "transfers").glob("from_account=*")} == {"from_account"}
    accounts = {r.account: r for r in spark.read.parquet(str(out / "accounts")).collect()}
    assert sum(r.net for r in accounts.values()) == 0
    assert accounts[2].sent == sum(10 + i for i in range(6) if i % 3 == 2) + 4
    assert sum(r.legs for r in accounts.values()) == 20
