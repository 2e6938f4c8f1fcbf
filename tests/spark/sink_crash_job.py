"""A streaming query whose driver stops dead between the executors' sends and the commit.

Run as a script by ``test_sink.py``: ``python sink_crash_job.py NAMESRV SOURCE TARGET CHECKPOINT READY``.
The sink is the real ``txmq`` writer, except that its ``commit`` first creates the file READY and then
waits forever, so the test can SIGKILL this whole process group (driver, JVM, Python workers) exactly in
that window. Defined here, in ``__main__``, the subclasses travel to Spark's workers by value.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from txmq.spark import register
from txmq.spark.sink import TxmqStreamWriter
from txmq.spark.source import TxmqDataSource


class StallingWriter(TxmqStreamWriter):
    ready = ""

    def commit(self, messages: list[Any], batchId: int) -> None:
        Path(self.ready).touch()
        while True:
            time.sleep(1)


class StallingSource(TxmqDataSource):
    @classmethod
    def name(cls) -> str:
        return "txmq_stalling"

    def streamWriter(self, schema: Any, overwrite: bool) -> TxmqStreamWriter:
        writer = StallingWriter(dict(self.options), schema)
        writer.ready = self.options["ready"]
        return writer


def main() -> None:
    namesrv, source, target, checkpoint, ready = sys.argv[1:6]
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(StallingSource)
    stream = (
        spark.readStream.format("txmq").option("endpoints", namesrv).option("topic", source)
        .option("startingOffsets", "earliest").load().selectExpr("body", "keys")
    )  # fmt: skip
    query = (
        stream.writeStream.format("txmq_stalling").option("endpoints", namesrv).option("topic", target)
        .option("checkpointLocation", checkpoint).option("ready", ready).option("checkImmunitySeconds", "1")
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()


if __name__ == "__main__":
    main()
