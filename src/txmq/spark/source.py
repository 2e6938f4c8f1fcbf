"""The ``txmq`` PySpark data source: batch and micro-batch streaming reads (imports pyspark).

Where each method runs (see ``docs/spark.md``): ``initialOffset``, ``latestOffset``, ``partitions`` and
``commit`` run in one long-lived Python worker per query, so state on ``self`` survives between them;
``read`` runs on executors with only the pickled reader and one partition. ``__init__`` runs in several
processes, so it opens no connection and holds only picklable options.

Spark calls ``initialOffset`` twice on a first start and persists neither result; resolving "latest"
twice would silently skip what arrived in between, so the first answer is cached and returned again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from txmq.common import errors
from txmq.spark import offsets as off
from txmq.spark import options as opt
from txmq.spark import schema as sch
from txmq.spark.fetch import Session, data_loss
from txmq.spark.rows import tuples_of
from txmq.spark.sink import SinkMixin

_TYPES: dict[str, DataType] = {
    "string": StringType(),
    "int": IntegerType(),
    "bigint": LongType(),
    "binary": BinaryType(),
    "timestamp": TimestampType(),
    "map<string,string>": MapType(StringType(), StringType(), valueContainsNull=True),
}


def spark_schema() -> StructType:
    """The fixed schema as a StructType (built in code: DDL parsing needs a JVM, workers have none)."""
    return StructType(
        [StructField(name, _TYPES[kind], name not in sch.NOT_NULL) for name, kind in sch.COLUMNS]
    )


class RangePartition(InputPartition):
    """Offsets ``[start, end)`` of one queue (all of a queue's planned range, or a piece of it when
    ``minPartitions`` / ``maxOffsetsPerPartition`` cut it); ``value`` is None for the placeholder of an
    empty read."""

    def __init__(self, value: off.QueueRange | None) -> None:
        super().__init__(value)


def _partitions(opts: opt.SourceOptions, ranges: list[off.QueueRange]) -> list[RangePartition]:
    pieces = off.split(
        ranges, min_partitions=opts.min_partitions, max_per_partition=opts.max_offsets_per_partition
    )
    return [RangePartition(r) for r in pieces]


def _read(opts: opt.SourceOptions, schema: StructType, partition: InputPartition) -> Iterator[Any]:
    rng = partition.value
    if rng is None:
        return
    arrow_schema = None
    if opts.arrow:
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(schema, timezone="UTC")
    with Session(opts) as session:
        if arrow_schema is not None:
            yield from session.pull_arrow(rng, arrow_schema)
        else:
            for columns in session.pull_columns(rng):
                yield from tuples_of(columns)


def _check_schema(schema: StructType) -> None:
    if [f.name for f in schema.fields] != list(sch.NAMES):
        raise errors.InvalidArgument(
            f"the txmq source has a fixed schema ({sch.DDL}); do not pass .schema(...)"
        )


class TxmqDataSource(SinkMixin, DataSource):
    """``spark.read.format("txmq")`` / ``spark.readStream.format("txmq")``; options in ``options.py``.

    The writer (``df.write`` / ``writeStream``) comes from :class:`txmq.spark.sink.SinkMixin`."""

    @classmethod
    def name(cls) -> str:
        return "txmq"

    def schema(self) -> StructType:
        return spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return TxmqBatchReader(opt.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return TxmqStreamReader(opt.parse(self.options, streaming=True), schema)


class TxmqBatchReader(DataSourceReader):
    def __init__(self, opts: opt.SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        with Session(self.opts) as session:
            start = session.resolve(self.opts.starting, missing=off.EARLIEST)
            end = session.resolve(self.opts.ending, missing=off.LATEST)
        off.check_start_not_after_end(start, end)
        ranges, _ = off.plan(start, end)
        return _partitions(self.opts, ranges) or [RangePartition(None)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, self.schema, partition)


class TxmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: opt.SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._initial: off.Offsets | None = None
        self._target: off.Flat | None = None  # Trigger.AvailableNow: never read past these

    def initialOffset(self) -> off.Offsets:
        if self._initial is None:
            with Session(self.opts) as session:
                self._initial = off.nest(session.resolve(self.opts.starting, missing=off.EARLIEST))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        with Session(self.opts) as session:
            self._target = session.low_high(session.queues())[1]

    def latestOffset(self, start: off.Offsets, limit: ReadLimit) -> off.Offsets:
        begin = off.flatten(start)
        with Session(self.opts) as session:
            keys = session.queues()
            low, high = session.low_high(keys)
        latest = dict(high)
        if self._target is not None:  # AvailableNow: stop at what existed when the query started
            latest = {k: min(v, self._target.get(k, begin.get(k, low[k]))) for k, v in high.items()}
        for key, value in begin.items():
            latest.setdefault(key, value)  # a queue that vanished from the route stays where it was
        baseline = {k: begin.get(k, low.get(k, 0)) for k in latest}  # new queues count from their min
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = off.limit_end(baseline, latest, max_rows)
        for key in latest:
            if key not in begin and end[key] == low.get(key, 0):
                end.pop(key)  # a new queue with nothing to read yet stays out of the offsets
        return off.nest(end)

    def partitions(self, start: off.Offsets, end: off.Offsets) -> Sequence[InputPartition]:
        ranges, losses = off.plan(off.flatten(start), off.flatten(end))
        for loss in losses:
            data_loss(self.opts, loss.describe())
        return _partitions(self.opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.opts, self.schema, partition)

    def commit(self, end: off.Offsets) -> None:
        """Nothing to do: the checkpoint is the source of truth and reads hold no broker state."""

    def stop(self) -> None:
        """Nothing to release: every call opened and closed its own session."""
