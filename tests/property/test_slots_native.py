"""The C slot maker (``common/_slots.c``) against its reference, ``fastinit.slot_maker_py``
(``object.__new__`` plus each slot descriptor's ``__set__``): for the classes the SDK builds per
message, the same object (type, every slot the very value given, equality, hash, repr); a wrong number
of values or a keyword is a ``TypeError`` and makes nothing; a class or name it cannot store into is
refused when the maker is made (``slot_maker`` then uses the reference). Skipped when the extension is
not built (no compiler, ``TXMQ_PURE=1``)."""

from __future__ import annotations

import dataclasses
import gc
import importlib
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client._transport import TransactionRef
from txmq.common import fastinit
from txmq.common.message import Message, MessageQueue, MessageView, SendResult

try:
    _slots = importlib.import_module("txmq.common._slots")
except ImportError:
    _slots = None

pytestmark = pytest.mark.skipif(_slots is None, reason="the _slots C extension is not built")

_CLASSES = [MessageView, TransactionRef, Message, SendResult, MessageQueue]
# any object goes in a slot (the maker, as the descriptors, checks no types): a mix of kinds
_VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.booleans(),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
    st.tuples(st.text(max_size=4)),
)


def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _outcome(fn: Any, obj: object) -> tuple[str, object]:
    try:
        return "ok", fn(obj)
    except Exception as exc:  # a value repr or hash cannot take: the same error both ways
        return "error", type(exc)


def _same(fast: object, reference: object, values: tuple[Any, ...]) -> None:
    assert type(fast) is type(reference)
    for name, value in zip(_names(type(reference)), values, strict=True):
        assert getattr(fast, name) is value
        assert getattr(reference, name) is value
    assert fast == reference
    assert _outcome(repr, fast) == _outcome(repr, reference)
    assert _outcome(hash, fast) == _outcome(hash, reference)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_CLASSES), st.data())
def test_the_c_maker_makes_what_the_reference_makes(cls: type, data: st.DataObject) -> None:
    names = _names(cls)
    values = tuple(data.draw(_VALUES) for _ in names)
    fast = _slots.maker(cls, names)(*values)
    _same(fast, fastinit.slot_maker_py(cls, names)(*values), values)
    # slot_maker hands out the C maker when it is built
    assert type(fastinit.slot_maker(cls, names)) is type(_slots.maker(cls, names))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(_CLASSES), st.integers(0, 30))
def test_a_wrong_number_of_values_is_refused_by_both(cls: type, count: int) -> None:
    names = _names(cls)
    if count == len(names):
        count += 1
    values = tuple(range(count))
    for maker in (_slots.maker(cls, names), fastinit.slot_maker_py(cls, names)):
        with pytest.raises(TypeError):
            maker(*values)


def test_keywords_are_refused() -> None:
    names = _names(MessageQueue)
    with pytest.raises(TypeError):
        _slots.maker(MessageQueue, names)("t", 1, broker_name="b")


def test_references_are_held_and_released() -> None:
    """Each stored value gains one reference per object and loses it when the object goes."""
    value = object()
    before = sys.getrefcount(value)
    made = [_slots.maker(MessageQueue, _names(MessageQueue))(value, value, value) for _ in range(10)]
    assert sys.getrefcount(value) == before + 30
    del made
    gc.collect()
    assert sys.getrefcount(value) == before


@dataclasses.dataclass
class _Plain:  # no slots: its fields are in __dict__
    a: int


class _Named(tuple[int, int]):
    __slots__ = ()


class _NoNew:
    __slots__ = ("a",)

    def __new__(cls) -> _NoNew:
        return super().__new__(cls)


class _Typed:
    __slots__ = ("a", "b")


@dataclasses.dataclass(frozen=True, slots=True)
class _OwnNew:  # a slotted dataclass with a __new__ of its own: the reference still fills it
    a: int

    def __new__(cls, *args: Any) -> _OwnNew:
        return object.__new__(cls)


def test_what_the_maker_cannot_store_into_is_refused_when_made() -> None:
    refused: list[tuple[Any, Any]] = [
        (_Plain, ("a",)),  # not a slot
        (_Named, ()),  # variable-size instances, tuple's own __new__
        (_NoNew, ("a",)),  # its own __new__
        (_Typed, ("a", "a")),  # a slot named twice
        (_Typed, ("a", 1)),  # a name that is not str
        (_Typed, ("c",)),  # no such slot
        (MessageView, ("__eq__",)),  # not a member descriptor
        (int, ()),  # not made by object.__new__
        ("MessageView", ()),  # not a class
        (_Typed, ["a"]),  # names not a tuple
    ]
    for cls, names in refused:
        with pytest.raises(TypeError):
            _slots.maker(cls, names)
    # a plain slotted class is taken, and a maker for some of its slots leaves the others unset
    made = _slots.maker(_Typed, ("b",))(5)
    assert made.b == 5
    with pytest.raises(AttributeError):
        _ = made.a


def test_slot_maker_checks_the_field_list() -> None:
    with pytest.raises(AssertionError):
        fastinit.slot_maker(MessageQueue, ("topic", "queue_id"))
    # and falls back to the reference for a class the C maker refuses
    with pytest.raises(TypeError):
        _slots.maker(_OwnNew, ("a",))
    made = fastinit.slot_maker(_OwnNew, ("a",))(7)
    assert made == _OwnNew(7) and type(made) is _OwnNew
