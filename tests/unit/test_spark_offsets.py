"""The source's offset planning without a JVM: canonical JSON, resolution, read limits, partitioning."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import SRC
from txmq.common import errors
from txmq.spark import offsets as off


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_the_spark_package_and_its_pure_modules_import_without_pyspark() -> None:
    done = _run(
        "import sys, txmq.spark, txmq.spark.options, txmq.spark.offsets, txmq.spark.schema, "
        "txmq.spark.fetch, txmq.spark.rows; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    )
    assert done.returncode == 0, done.stderr


def test_register_without_pyspark_names_the_extra_to_install() -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('pyspark', 'pyarrow'): raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import importlib.util\n"
        "importlib.util.find_spec = lambda n, *a: None if n in ('pyspark', 'pyarrow') else 1\n"
        "import txmq.spark\n"
        "try:\n"
        "    txmq.spark.register(None)\n"
        "except txmq.spark.SparkUnavailable as exc:\n"
        "    print(exc)\n"
    )
    done = _run(blocker)
    assert done.returncode == 0, done.stderr
    assert "pyspark and pyarrow" in done.stdout and "pip install 'txmq[spark]'" in done.stdout


def test_missing_java_is_named() -> None:
    done = _run(
        "import os; os.environ['PATH'] = '/nonexistent'; os.environ.pop('JAVA_HOME', None)\n"
        "import txmq.spark\n"
        "try:\n"
        "    txmq.spark.require_spark()\n"
        "except txmq.spark.SparkUnavailable as exc:\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "Java runtime" in done.stdout


def test_canonical_order_is_fixed_whatever_the_input_order() -> None:
    a = off.canonical({"b": {"10": 1, "2": 2}, "a": {1: 3, 0: 4}})
    b = off.canonical({"a": {"0": 4, "1": 3}, "b": {"2": 2, "10": 1}})
    assert json.dumps(a) == json.dumps(b) == '{"a": {"0": 4, "1": 3}, "b": {"2": 2, "10": 1}}'


def test_json_round_trip_keeps_string_keys_and_order() -> None:
    offsets = off.nest({("t", 3): 7, ("t", 0): 1, ("s", 1): 0})
    text = off.to_json(offsets)
    assert off.from_json(text) == offsets
    assert json.loads(json.dumps(offsets)) == offsets  # what Spark does between calls
    assert list(offsets) == ["s", "t"] and list(offsets["t"]) == ["0", "3"]


@pytest.mark.parametrize(
    "text",
    ['{"t": {"x": 1}}', '{"t": {"0": "1"}}', '{"t": [1]}', "[1]", "{", '{"t": {"0": true}}'],
)
def test_malformed_offsets_are_rejected(text: str) -> None:
    with pytest.raises(errors.InvalidOffset):
        off.from_json(text)


def test_resolve_replaces_earliest_and_latest_and_fills_missing_queues() -> None:
    keys = [("t", 0), ("t", 1), ("t", 2)]
    low = {("t", 0): 5, ("t", 1): 0, ("t", 2): 1}
    high = {("t", 0): 9, ("t", 1): 4, ("t", 2): 8}
    got = off.resolve({("t", 0): -2, ("t", 1): -1}, keys, low, high, missing=off.EARLIEST)
    assert got == {("t", 0): 5, ("t", 1): 4, ("t", 2): 1}
    assert off.resolve(None, keys, low, high, missing=off.LATEST) == high
    with pytest.raises(errors.InvalidOffset, match="do not exist"):
        off.resolve({("t", 9): 0}, keys, low, high, missing=off.EARLIEST)
    with pytest.raises(errors.InvalidOffset, match="negative"):
        off.resolve({("t", 0): -3}, keys, low, high, missing=off.EARLIEST)


def test_limit_end_reads_everything_when_under_the_limit() -> None:
    start = {("t", 0): 0, ("t", 1): 5}
    latest = {("t", 0): 3, ("t", 1): 6}
    assert off.limit_end(start, latest, None) == latest
    assert off.limit_end(start, latest, 4) == latest


def test_limit_end_shares_the_budget_fairly_and_never_exceeds_it() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0, ("t", 3): 0}
    latest = {("t", 0): 100, ("t", 1): 2, ("t", 2): 100, ("t", 3): 0}
    end = off.limit_end(start, latest, 10)
    assert sum(end[k] - start[k] for k in start) == 10
    assert end[("t", 1)] == 2 and end[("t", 3)] == 0  # a short queue passes its share on
    assert end[("t", 0)] == 4 and end[("t", 2)] == 4
    for key in start:
        assert start[key] <= end[key] <= latest[key]


def test_a_budget_smaller_than_the_queue_count_does_not_starve_a_queue() -> None:
    start = {("t", q): 0 for q in range(4)}
    latest = {("t", q): 5 for q in range(4)}
    seen: set[tuple[str, int]] = set()
    for _ in range(4):
        end = off.limit_end(start, latest, 1)
        moved = [k for k in start if end[k] != start[k]]
        assert len(moved) == 1
        seen |= set(moved)
        start = end
    assert seen == set(latest)


def test_limit_end_walks_to_latest_in_bounded_steps() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 20, ("t", 1): 16}
    sizes = []
    while start != latest:
        end = off.limit_end(start, latest, 10)
        sizes.append(sum(end[k] - start[k] for k in start))
        start = end
    assert sizes == [10, 10, 10, 6]


def test_plan_gives_one_range_per_queue_with_data_and_none_when_equal() -> None:
    start = {("t", 0): 3, ("t", 1): 5}
    end = {("t", 0): 7, ("t", 1): 5, ("t", 2): 4}
    ranges, losses = off.plan(start, end)
    assert ranges == [off.QueueRange("t", 0, 3, 7), off.QueueRange("t", 2, off.EARLIEST, 4)]
    assert losses == []
    assert off.plan(start, dict(start)) == ([], [])


def test_plan_reports_a_queue_that_went_backwards_as_loss() -> None:
    ranges, losses = off.plan({("t", 0): 9}, {("t", 0): 2})
    assert ranges == []
    assert losses == [off.Loss("t", 0, 9, 2)]
    assert "went back from offset 9 to 2" in losses[0].describe()


def _r(queue: int, start: int, end: int) -> off.QueueRange:
    return off.QueueRange("t", queue, start, end)


def test_split_changes_nothing_without_options() -> None:
    ranges = [_r(0, 0, 100), _r(1, off.EARLIEST, 7)]
    assert off.split(ranges) == ranges
    assert off.split(ranges, min_partitions=1, max_per_partition=1000) == ranges


def test_split_to_min_partitions_cuts_the_biggest_ranges_first() -> None:
    assert off.split([_r(0, 0, 100), _r(1, 50, 60)], min_partitions=4) == [
        _r(0, 0, 33), _r(0, 33, 66), _r(0, 66, 100), _r(1, 50, 60),
    ]  # fmt: skip
    assert off.split([_r(0, 10, 12)], min_partitions=5) == [_r(0, 10, 11), _r(0, 11, 12)]  # 1 offset each
    new_queue = [_r(0, off.EARLIEST, 100)]
    assert off.split(new_queue, min_partitions=4, max_per_partition=10) == new_queue  # size unknown


def test_split_caps_offsets_per_partition() -> None:
    assert off.split([_r(0, 0, 25)], max_per_partition=10) == [_r(0, 0, 8), _r(0, 8, 16), _r(0, 16, 25)]


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 5_000)), min_size=0, max_size=6),
    min_partitions=st.one_of(st.none(), st.integers(1, 40)),
    max_per=st.one_of(st.none(), st.integers(1, 3_000)),
)
def test_split_covers_each_range_exactly(
    sizes: list[tuple[int, int]], min_partitions: int | None, max_per: int | None
) -> None:
    ranges = [_r(q, start, start + size) for q, (start, size) in enumerate(sizes)]
    pieces = off.split(ranges, min_partitions=min_partitions, max_per_partition=max_per)
    for r in ranges:
        mine = [p for p in pieces if p.queue_id == r.queue_id]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        assert all(p.end > p.start for p in mine)
        assert max(p.end - p.start for p in mine) - min(p.end - p.start for p in mine) <= 1
        if max_per is not None:
            assert all(p.end - p.start <= max_per for p in mine)
    total = sum(r.end - r.start for r in ranges)
    if min_partitions is not None:
        assert len(pieces) >= min(min_partitions, total)
