"""The key index's head in C (``_batchenc.Head``: hash -> newest entry position in an open-addressing
table) against the dict it replaces: any mix of stores, lookups and batch extensions gives the same
answers and the same items in the same order (a dict's first-insertion order); and every index call
that takes a head (``index_add``, ``index_add_rows``, ``index_add_fresh``, ``head_extend``) given a
Head leaves it, the arrays and the pending entries exactly as it leaves a dict (the dict path being
held to the Python reference by test_index_fresh.py, test_index_rows.py and
test_batchenc_native.py). A refused batch (a known or repeated hash) leaves the table as it was,
which is checked after table growth too. Skipped when the extension is not built."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.storage import codec
from txmq.storage.index import ActiveEntries, new_head

NATIVE: Any = codec.BATCHENC
pytestmark = pytest.mark.skipif(NATIVE is None, reason="txmq.storage._batchenc is not built")

# few distinct hashes (collisions in a small table, repeats) and full-range ones
_HASHES = st.one_of(st.integers(0, 40), st.integers(0, 2**64 - 1), st.sampled_from([0, 2**63, 2**64 - 1]))
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), _HASHES, st.integers(0, 2**63 - 1)),
        st.tuples(st.just("get"), _HASHES, st.just(0)),
        st.tuples(st.just("extend"), st.lists(_HASHES, max_size=70), st.integers(0, 2**40)),
    ),
    max_size=60,
)


def _digests(hashes: list[int]) -> bytes:
    return b"".join(h.to_bytes(8, "big") for h in hashes)


@settings(max_examples=300, deadline=None)
@given(ops=_OPS)
@example(ops=[("extend", list(range(200)), 0), ("extend", [5, 1000], 200), ("get", 1000, 0)])
@example(ops=[("set", 3, 1), ("set", 3, 2), ("extend", [7, 7], 0), ("set", 2**64 - 1, 0)])
def test_head_is_the_dict(ops: list[tuple[str, Any, int]]) -> None:
    head, model = NATIVE.Head(), {}
    for op, arg, value in ops:
        if op == "set":
            head[arg] = value
            model[arg] = value
        elif op == "get":
            assert head.get(arg, -1) == model.get(arg, -1)
            assert (arg in head) is (arg in model)
            if arg in model:
                assert head[arg] == model[arg]
            else:
                with pytest.raises(KeyError):
                    head[arg]
        else:
            fresh = len(set(arg)) == len(arg) and not set(arg) & set(model)
            assert NATIVE.head_extend(head, _digests(arg), value) is fresh
            assert NATIVE.head_extend(model, _digests(arg), value) is fresh
        assert len(head) == len(model)
    assert list(head.items()) == list(model.items())
    assert head.keys() == list(model) and head.values() == list(model.values())
    assert list(head) == list(model) and head.to_dict() == model
    assert head == model
    assert (head != model) is False
    assert (NATIVE.Head() == head) is (not model)


def test_head_refuses_what_a_position_is_not() -> None:
    head = NATIVE.Head()
    for key, value in ((-1, 0), (2**64, 0), ("k", 0)):
        with pytest.raises((TypeError, OverflowError)):
            head[key] = value
    for value in (-1, 2**63, "1", None):
        with pytest.raises((TypeError, ValueError, OverflowError)):
            head[5] = value
    with pytest.raises(TypeError):
        del head[5]
    with pytest.raises(TypeError):
        NATIVE.Head({})
    assert len(head) == 0 and "k" not in head and -1 not in head and head.get("k", 7) == 7
    assert head == {} and head != {1: 2} and repr(head) == "Head({})"
    with pytest.raises(TypeError):
        hash(head)


def _entries(head: object) -> ActiveEntries:
    entries = ActiveEntries()
    entries.head = head  # type: ignore[assignment]
    return entries


def _state(entries: ActiveEntries, pending: bytearray) -> tuple[object, ...]:
    return (
        list(entries.head.items()),  # type: ignore[attr-defined]
        entries.offsets.tobytes(),
        entries.stamps.tobytes(),
        entries.previous.tobytes(),
        bytes(pending),
    )


_KEYS = st.one_of(
    st.sampled_from(["a", "b", "c", "", "ключ"]), st.text("0123456789ABCDEF", min_size=32, max_size=32)
)
_ROWS = st.lists(st.lists(_KEYS, max_size=3).map(tuple), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["add", "rows", "fresh"]), _ROWS, st.integers(0, 50)), max_size=8
    )
)
@example(calls=[("fresh", [("a",), ("b",)], 1), ("fresh", [("c",), ("a",)], 1), ("rows", [("a", "a")], 1)])
def test_index_calls_leave_a_head_as_a_dict(calls: list[tuple[str, list[tuple[str, ...]], int]]) -> None:
    """The same calls on a dict head and on a Head: the same answers and state after every call."""
    sides = [(_entries({}), bytearray()), (_entries(NATIVE.Head()), bytearray())]
    offset = 0
    for kind, rows, gap in calls:
        offset += gap
        offsets = [offset + 10 * i for i in range(len(rows))]
        stamps = [7 + i for i in range(len(rows))]
        answers = []
        for entries, pending in sides:
            args = (entries.head, entries.offsets, entries.stamps, entries.previous, pending)
            if kind == "add":
                for row, at in zip(rows, offsets, strict=True):
                    NATIVE.index_add(*args, row, at, 5)
                answers.append(None)
            elif kind == "rows":
                answers.append(NATIVE.index_add_rows(*args, list(rows), list(offsets), list(stamps)))
            else:
                answers.append(NATIVE.index_add_fresh(*args, rows, offsets, 5))
        assert answers[0] is answers[1]
        assert _state(*sides[0]) == _state(*sides[1])
        offset = offsets[-1] + 1 if offsets else offset


def test_a_refused_batch_leaves_a_grown_head_as_it_was() -> None:
    """Batches that grow the table (a rehash) and then one refused at its last key: the table, its
    order and every lookup are as before (the new hashes taken back newest first)."""
    head, model = NATIVE.Head(), {}
    entries = _entries(head)
    for start in range(0, 3000, 300):
        hashes = [h * 0x9E3779B97F4A7C15 % 2**64 for h in range(start, start + 300)]
        assert NATIVE.head_extend(head, _digests(hashes), start) is True
        model.update(zip(hashes, range(start, start + 300), strict=True))
    refused = [h * 0x9E3779B97F4A7C15 % 2**64 for h in range(5000, 5400)] + [next(iter(model))]
    assert NATIVE.head_extend(head, _digests(refused), 3000) is False
    assert list(head.items()) == list(model.items())
    assert all(head.get(h, -1) == -1 for h in refused[:-1])
    assert entries.extend_new(refused[:-1], list(range(400)), 1) is True  # now fresh
    assert len(head) == 3400
    pending = bytearray()
    assert (
        NATIVE.index_add_fresh(head, array("q"), array("q"), array("q"), pending, [("a",), ("a",)], [1, 2], 5)
        is False
    )
    assert len(head) == 3400 and not pending


def test_an_empty_active_file_makes_a_c_head() -> None:
    assert type(ActiveEntries().head) is type(new_head()) is NATIVE.Head
