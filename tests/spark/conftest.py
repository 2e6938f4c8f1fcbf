"""Spark fixtures: ONE SparkSession for the whole run and one real broker.

The session runs ``local[2,3]`` (two cores; a failed task is retried up to 3 attempts, as on a cluster:
the sink's retry tests need it) with the UI off.

The JVM starts in 4-10 s, so every Spark test shares the session. Python workers are started by the JVM
from this process's environment, so PYTHONPATH (this checkout's ``src`` first: the shared virtualenv's
editable install points at another checkout) and PYSPARK_PYTHON are set before the session starts.
Tests here are marked ``spark``; they are skipped, with the reason, when pyspark, pyarrow or Java is
missing.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.broker import FAST_FLAGS, BrokerProcess, require_remoting_server
from tests.client.conftest import create_topic
from tests.conftest import SRC

_names = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from txmq.spark import SparkUnavailable, register, require_spark

    try:
        require_spark()
    except SparkUnavailable as exc:
        pytest.skip(str(exc))
    from pyspark.sql import SparkSession

    root = tmp_path_factory.mktemp("spark")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2,3]")  # task retries, as on a cluster
        .appName("txmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(root / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={root / 'derby'}")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    require_remoting_server()
    process = BrokerProcess(Path(tmp_path_factory.mktemp("spark-broker")), *FAST_FLAGS)
    process.start()
    yield process
    process.stop()


def new_topic(broker: BrokerProcess, queues: int = 4) -> str:
    """A fresh topic with ``queues`` queues, so tests sharing the broker never interfere."""
    topic = f"spark{next(_names)}"
    asyncio.run(create_topic(broker, topic, queues))
    return topic
