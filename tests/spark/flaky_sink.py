"""The real ``txmq`` writer with one injected fault per partition, on each task's FIRST attempt only.

* even partitions: the rows' iterator raises after ``FAIL_AFTER_ROWS`` rows (what a failing upstream
  operator does to the writer): the task rolls back the halves it sent, and fails;
* odd partitions: every row is sent, then the Python worker dies (``os._exit``) before the task reports
  its commit message: its halves are left pending, under a token no marker will name.

Spark retries the task (the session runs ``local[2,3]``) and attempt 1 writes normally. Each attempt
touches ``<flakyDir>/p<partition>-a<attempt>`` so the test can see that the faults really fired. The
classes travel to Spark's Python workers by value (``cloudpickle.register_pickle_by_value``): the
workers cannot import ``tests``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark import TaskContext
from pyspark.sql.types import StructType

from txmq.spark.sink import TxmqBatchWriter, TxmqStreamWriter
from txmq.spark.source import TxmqDataSource

FAIL_AFTER_ROWS = 5


def _first_attempt(flaky_dir: str) -> tuple[int, bool]:
    context = TaskContext.get()
    assert context is not None
    partition, attempt = context.partitionId(), context.attemptNumber()
    (Path(flaky_dir) / f"p{partition}-a{attempt}").touch()
    return partition, attempt == 0


def _raising(iterator: Iterator[Any]) -> Iterator[Any]:
    for index, row in enumerate(iterator):
        if index == FAIL_AFTER_ROWS:
            raise RuntimeError("injected: an upstream failure in the first attempt")
        yield row


def _flaky_write(write: Any, flaky_dir: str, iterator: Iterator[Any]) -> Any:
    partition, first = _first_attempt(flaky_dir)
    if not first:
        return write(iterator)
    if partition % 2 == 0:
        return write(_raising(iterator))
    write(iterator)  # every half sent and stored ...
    os._exit(3)  # ... then the worker dies before Spark gets the commit message


class FlakyBatchWriter(TxmqBatchWriter):
    flaky_dir = ""

    def write(self, iterator: Iterator[Any]) -> Any:
        return _flaky_write(super().write, self.flaky_dir, iterator)


class FlakyStreamWriter(TxmqStreamWriter):
    flaky_dir = ""

    def write(self, iterator: Iterator[Any]) -> Any:
        return _flaky_write(super().write, self.flaky_dir, iterator)


class FlakySource(TxmqDataSource):
    @classmethod
    def name(cls) -> str:
        return "txmq_flaky"

    def writer(self, schema: StructType, overwrite: bool) -> TxmqBatchWriter:
        writer = FlakyBatchWriter(dict(self.options), schema)
        writer.flaky_dir = self.options["flakyDir"]
        return writer

    def streamWriter(self, schema: StructType, overwrite: bool) -> TxmqStreamWriter:
        writer = FlakyStreamWriter(dict(self.options), schema)
        writer.flaky_dir = self.options["flakyDir"]
        return writer
