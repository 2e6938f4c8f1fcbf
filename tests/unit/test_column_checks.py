"""The batch column checks written as loops (compiled: a few dozen instructions an element, where
min/max/sum over ``map(len, ...)`` cost ~300): the same answers as the builtins, bounds included."""

from __future__ import annotations

import pytest

from txmq.broker.send import _sizes
from txmq.storage.store import _longest, _within


@pytest.mark.parametrize(
    "items",
    [
        [b"a"],
        [b"a", b"ab"],
        [b"ab", b"a"],
        [b"", b"xyz"],
        [b"xyz", b""],
        [b"ab", b"abcd", b"a", b"abc"],
        [b"same"] * 5,
        [b"x" * 9, b"y"],
    ],
)
def test_sizes_are_sum_min_max_of_lengths(items: list[bytes]) -> None:
    lengths = [len(item) for item in items]
    assert _sizes(items) == (sum(lengths), min(lengths), max(lengths))
    assert _sizes(tuple(items)) == (sum(lengths), min(lengths), max(lengths))


def test_longest_is_max_len_and_zero_when_empty() -> None:
    assert _longest([b"ab", b"abcd", b"a"]) == 4
    assert _longest((b"abc", b"")) == 3
    assert _longest([b"a", b"ab"]) == 2
    assert _longest(()) == 0


@pytest.mark.parametrize(
    ("cols", "expected"),
    [
        (((0, 9), (5,)), True),
        (((-1,),), False),  # below low
        (((10,),), False),  # high itself is out
        (((9,), (3, 10)), False),  # a later column out
        (((0,) * 3, (9, 0), (1, 2)), True),
    ],
)
def test_within_is_a_half_open_range_over_every_column(
    cols: tuple[tuple[int, ...], ...], expected: bool
) -> None:
    assert _within(0, 10, *cols) is expected


def test_within_at_64_bit_bounds() -> None:
    low, high = -(1 << 63), 1 << 63
    assert _within(low, high, (low, high - 1))
    assert not _within(low, high, (high,))
    assert not _within(low, high, (low - 1,))
