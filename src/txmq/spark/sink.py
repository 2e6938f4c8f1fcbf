"""The ``txmq`` writer for batch and streaming DataFrames; exactly-once (see :mod:`.sink_plan`).

::

    df.writeStream.format("txmq").option("endpoints", "127.0.0.1:9876").option("topic", "out") \\
        .option("checkpointLocation", "/chk/out").start()
    df.write.format("txmq").option("endpoints", "127.0.0.1:9876").option("topic", "out").mode("append").save()

Columns: ``body`` (binary or string, required) and optionally ``topic``, ``tags``, ``keys`` (a string of
space-separated keys or an array), ``properties`` (map) and ``message_group``. Options: ``endpoints`` (the
name server), ``topic`` (wins over the column), ``sinkId`` (default: derived from ``checkpointLocation``;
one sink id per checkpoint), ``checkImmunitySeconds`` (first check-back of a half message).

What runs where: ``write`` runs in executor tasks and sends half messages; ``commit``/``abort`` run in a
driver-side Python worker that Spark creates afresh for each batch, so every bit of state lives in the
broker (the marker log). The streaming task learns its batch id from Spark's local property
``streaming.sql.batchId``. Rows keep no order across tasks: repartition by a key first if order matters.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from txmq.common import errors
from txmq.common.message import Message
from txmq.spark.sink_log import TaskResult, abort_epoch, finish_epoch, send_task
from txmq.spark.sink_plan import JOB_PREFIX, SinkOptions, check_columns, message_of, parse_sink_options

BATCH_ID_PROPERTY = "streaming.sql.batchId"


class TxmqCommitMessage(WriterCommitMessage):
    """One task attempt's halves, carried from the executor to the driver's commit."""

    def __init__(self, result: TaskResult) -> None:
        self.result = result


def _rows(columns: Sequence[str], iterator: Iterator[Any], topic: str | None) -> Iterator[Message]:
    for row in iterator:
        yield message_of(dict(zip(columns, row, strict=True)), topic)


def _write(options: SinkOptions, epoch: str, columns: Sequence[str], iterator: Iterator[Any]) -> Any:
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    result = asyncio.run(send_task(options, epoch, partition, _rows(columns, iterator, options.topic)))
    return TxmqCommitMessage(result)


def _results(messages: Sequence[Any]) -> list[TaskResult | None]:
    return [m.result if isinstance(m, TxmqCommitMessage) else None for m in messages]


class TxmqBatchWriter(DataSourceWriter):
    """``df.write.format("txmq")``: halves from the tasks, committed when the job succeeds.

    The epoch ``job-<uuid>`` is drawn once on the driver and pickled to every task, so all of a job's
    halves share it and its marker settles them even if the driver dies mid-commit.
    """

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(options, streaming=False)
        self.columns = list(schema.fieldNames())
        check_columns(self.columns, self.options)
        self.epoch = JOB_PREFIX + uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> Any:
        return _write(self.options, self.epoch, self.columns, iterator)

    def commit(self, messages: list[Any]) -> None:
        asyncio.run(finish_epoch(self.options, self.epoch, _results(messages)))

    def abort(self, messages: list[Any]) -> None:
        asyncio.run(abort_epoch(self.options, self.epoch, _results(messages)))


class TxmqStreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("txmq")``: batch N's halves committed and recorded by ``commit(_, N)``;
    a replayed N is rolled back; orphans are settled by check-back from the marker log."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(options, streaming=True)
        self.columns = list(schema.fieldNames())
        check_columns(self.columns, self.options)

    def write(self, iterator: Iterator[Any]) -> Any:
        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        if batch is None or not batch.isdecimal():
            raise errors.Unsupported(
                f"the txmq stream writer found no Spark batch id ({BATCH_ID_PROPERTY}); "
                "it runs only in micro-batch streaming queries"
            )
        return _write(self.options, batch, self.columns, iterator)

    def commit(self, messages: list[Any], batchId: int) -> None:
        asyncio.run(finish_epoch(self.options, str(batchId), _results(messages)))

    def abort(self, messages: list[Any], batchId: int) -> None:
        asyncio.run(abort_epoch(self.options, str(batchId), _results(messages)))


class SinkMixin:
    """``writer``/``streamWriter`` for the ``txmq`` DataSource class (mixed into it in :mod:`.source`)."""

    options: Any

    def writer(self, schema: StructType, overwrite: bool) -> TxmqBatchWriter:
        _no_overwrite(overwrite)
        return TxmqBatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> TxmqStreamWriter:
        _no_overwrite(overwrite)
        return TxmqStreamWriter(dict(self.options), schema)


def _no_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise errors.Unsupported("a txmq topic is append-only: use mode('append') / outputMode('append')")
