"""The C tuple maker (``common/_slots.c``'s ``tuple_maker``) against its reference,
``fastinit.tuple_maker_py`` (``tuple.__new__(cls, values)``): for the NamedTuples the broker builds per
message and per transaction, the same object (type, every item the very value given, equality, hash,
repr, fields by name, GC-tracked); a wrong number of values or a keyword is a ``TypeError`` and makes
nothing; a class that is not a tuple subclass is refused when the maker is made (``tuple_maker`` then
uses the reference). The C part is skipped when the extension is not built (no compiler,
``TXMQ_PURE=1``); the reference's part runs either way."""

from __future__ import annotations

import gc
import importlib
import sys
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.broker.send import HalfAppend, LaneAppend
from txmq.broker.transaction.service import _Pending
from txmq.common import fastinit
from txmq.server.remoting.producer import EndFields
from txmq.server.remoting_transport import Deferred
from txmq.storage.api import AppendResult, RecordFields, StoredTuple
from txmq.storage.commitlog import BatchAppend, DispatchEntry

try:
    _slots: Any = importlib.import_module("txmq.common._slots")
except ImportError:
    _slots = None

_needs_c = pytest.mark.skipif(_slots is None, reason="the _slots C extension is not built")

_CLASSES: list[Any] = [
    DispatchEntry, AppendResult, RecordFields, StoredTuple, BatchAppend, _Pending, EndFields, Deferred,
    HalfAppend, LaneAppend,
]  # fmt: skip
_VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.booleans(),
    st.tuples(st.text(max_size=4)),
    st.lists(st.integers(), max_size=3),
)


def _outcome(fn: Any, obj: object) -> tuple[str, object]:
    try:
        return "ok", fn(obj)
    except Exception as exc:  # a value hash cannot take (a list): the same error both ways
        return "error", type(exc)


def _same(fast: object, reference: object, values: tuple[Any, ...]) -> None:
    assert type(fast) is type(reference)
    assert isinstance(fast, tuple) and isinstance(reference, tuple)
    assert len(fast) == len(reference) == len(values)
    for i, value in enumerate(values):
        assert fast[i] is value and reference[i] is value
    for name in type(reference)._fields:  # type: ignore[attr-defined]
        assert getattr(fast, name) is getattr(reference, name)
    assert fast == reference
    assert repr(fast) == repr(reference)
    assert _outcome(hash, fast) == _outcome(hash, reference)
    assert gc.is_tracked(fast) == gc.is_tracked(reference)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_CLASSES), st.data())
def test_the_reference_is_tuple_new(cls: Any, data: st.DataObject) -> None:
    values = tuple(data.draw(_VALUES) for _ in cls._fields)
    _same(fastinit.tuple_maker_py(cls, len(cls._fields))(*values), tuple.__new__(cls, values), values)


@_needs_c
@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_CLASSES), st.data())
def test_the_c_maker_makes_what_the_reference_makes(cls: Any, data: st.DataObject) -> None:
    values = tuple(data.draw(_VALUES) for _ in cls._fields)
    fast = _slots.tuple_maker(cls, len(cls._fields))(*values)
    _same(fast, fastinit.tuple_maker_py(cls, len(cls._fields))(*values), values)
    # tuple_maker hands out the C maker when it is built
    assert type(fastinit.tuple_maker(cls)) is type(_slots.tuple_maker(cls, 1))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(_CLASSES), st.integers(0, 30))
def test_a_wrong_number_of_values_is_refused_by_both(cls: Any, count: int) -> None:
    if count == len(cls._fields):
        count += 1
    makers = [fastinit.tuple_maker_py(cls, len(cls._fields)), fastinit.tuple_maker(cls)]
    for maker in makers:
        with pytest.raises(TypeError):
            maker(*range(count))


@_needs_c
def test_keywords_are_refused() -> None:
    with pytest.raises(TypeError):
        _slots.tuple_maker(AppendResult, 4)(1, 2, 3, store_timestamp_ms=4)


@_needs_c
def test_references_are_held_and_released() -> None:
    """Each item gains one reference per object and loses it when the object goes."""
    value = object()
    before = sys.getrefcount(value)
    maker = _slots.tuple_maker(AppendResult, 4)
    made = [maker(value, value, value, value) for _ in range(10)]
    assert sys.getrefcount(value) == before + 40
    del made
    gc.collect()
    assert sys.getrefcount(value) == before


class _Pair(NamedTuple):
    a: int
    b: int


class _Plain:
    __slots__ = ("a",)


@_needs_c
def test_what_is_not_a_tuple_subclass_is_refused_when_made() -> None:
    refused: list[tuple[Any, Any]] = [
        (tuple, 2),  # tuple itself (tuple.__new__ makes a plain tuple without a maker)
        (_Plain, 1),  # not a tuple
        (int, 1),
        ("AppendResult", 4),  # not a class
        (_Pair, "2"),  # count not an int
        (_Pair, -1),
    ]
    for cls, count in refused:
        with pytest.raises((TypeError, ValueError)):
            _slots.tuple_maker(cls, count)
    assert _slots.tuple_maker(_Pair, 2)(1, 2) == _Pair(1, 2)


def test_tuple_maker_makes_the_named_tuple_either_way() -> None:
    """With the extension (the C maker) or without it (``TXMQ_PURE=1``: the reference)."""
    made = fastinit.tuple_maker(_Pair)(1, 2)
    assert type(made) is _Pair and made == _Pair(1, 2) and made.b == 2
