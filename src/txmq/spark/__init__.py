"""txmq on Spark: a PySpark (4.3, Python Data Source API) data source registered as ``txmq``.

::

    import txmq.spark
    txmq.spark.register(spark)
    df = spark.read.format("txmq").option("endpoints", "127.0.0.1:9876").option("topic", "orders").load()

This package imports without pyspark: ``register`` checks for pyspark, pyarrow and a Java runtime and
raises ``SparkUnavailable`` naming what to install; only then does it import the pyspark-dependent module
(``txmq.spark.source``). The pure parts (``options``, ``offsets``, ``schema``) never import pyspark, so
they are unit-tested without a JVM. See ``docs/spark.md``.
"""

from __future__ import annotations

from typing import Any

from txmq.spark.deps import SparkUnavailable, require_spark

SOURCE_NAME = "txmq"

__all__ = ["SOURCE_NAME", "SparkUnavailable", "register", "require_spark"]


def register(spark: Any) -> None:
    """Register the ``txmq`` data source on ``spark`` (a ``SparkSession``); idempotent."""
    require_spark()
    from txmq.spark.source import TxmqDataSource

    spark.dataSource.register(TxmqDataSource)
