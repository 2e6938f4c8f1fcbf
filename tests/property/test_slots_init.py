"""``slot_init``'s ``__init__`` in C (``common/_slots.c`` ``initializer``) against its reference, the
Python ``__init__`` slot_init generates (``cls.__init__.__wrapped__``): for any call, by position and
by name, right or wrong, the same fields stored (slot by slot, also those stored before a factory or
converter raised) and the same error (type and text). Skipped when the extension is not built
(``TXMQ_PURE=1``, where ``__init__`` is the reference itself)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.common import fastinit
from txmq.common.fastinit import slot_init
from txmq.common.message import Message, MessageView, SendResult

try:
    _slots = importlib.import_module("txmq.common._slots")
except ImportError:
    _slots = None

pytestmark = pytest.mark.skipif(_slots is None, reason="the _slots C extension is not built")

_UNSET = "<unset>"


def _explode(value: object) -> object:
    if value == "boom":
        raise ValueError("boom")
    return bytes(value) if isinstance(value, bytearray) else value


_made = [0]


def _counted() -> list[int]:
    _made[0] += 1
    if _made[0] % 5 == 0:
        raise RuntimeError("factory failed")
    return [_made[0]]


@dataclass(frozen=True, slots=True)
class _Probe:
    a: object
    b: object = "b"
    c: object = field(default_factory=_counted)
    d: object = None


_PROBE = slot_init(_Probe, coerce={"b": (bytes, _explode)})


class _SubMessage(Message):
    __slots__ = ()


def _state(obj: object, names: list[str]) -> list[object]:
    out: list[object] = []
    for name in names:
        try:
            out.append(getattr(obj, name))
        except AttributeError:
            out.append(_UNSET)
    return out


def _run(init: Any, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[object, list[object]]:
    obj = object.__new__(cls)
    try:
        outcome: object = init(obj, *args, **kwargs)
    except Exception as exc:  # the error is part of what must agree
        outcome = (type(exc), str(exc))
    return outcome, _state(obj, [f.name for f in dataclasses.fields(cls)])


_VALUES = st.one_of(
    st.none(), st.integers(-2, 2), st.text(max_size=3), st.binary(max_size=3), st.just("boom"),
    st.builds(bytearray, st.binary(max_size=3)), st.just(()), st.just(("k",)), st.booleans(),
    st.just(fastinit._FACTORY),
)  # fmt: skip
_NAMES = st.sampled_from(
    [f.name for f in dataclasses.fields(Message)] + ["a", "b", "c", "d", "nope", "self", "body"]
)


@settings(max_examples=600, deadline=None)
@given(
    cls=st.sampled_from([Message, _SubMessage, _PROBE, SendResult]),
    args=st.lists(_VALUES, max_size=13),
    kwargs=st.dictionaries(_NAMES, _VALUES, max_size=5),
)
def test_the_c_init_is_the_reference(cls: type, args: list[Any], kwargs: dict[str, Any]) -> None:
    init = cls.__init__
    assert type(init).__name__ == "Init"
    reference = init.__wrapped__
    _made[0] = 0
    expected = _run(reference, cls, tuple(args), kwargs)
    _made[0] = 0
    assert _run(init, cls, tuple(args), kwargs) == expected
    _made[0] = 0
    made: object = None
    try:  # the class call: object.__new__, then the C init through the type's slot
        made = cls(*args, **kwargs)
        outcome: object = None
    except Exception as exc:  # the error is part of what must agree
        outcome = (type(exc), str(exc))
    assert outcome == expected[0]
    if outcome is None:
        assert _state(made, [f.name for f in dataclasses.fields(cls)]) == expected[1]


def test_the_init_keeps_the_reference_face() -> None:
    for cls in (Message, MessageView, SendResult, _PROBE):
        init = cls.__init__
        assert init.__wrapped__.__qualname__ == init.__qualname__ == f"{cls.__qualname__}.__init__"
        assert inspect.signature(cls) == inspect.signature(init.__wrapped__).replace(
            parameters=list(inspect.signature(init.__wrapped__).parameters.values())[1:]
        )
    message = Message("t", b"x")
    bound = message.__init__  # a bound method, like a function's
    assert bound.__self__ is message
    bound("u", b"y", tags="g")
    assert (message.topic, message.body, message.tags) == ("u", b"y", "g")
    with pytest.raises(TypeError, match="multiple values"):
        Message("t", b"x", topic="u")
    with pytest.raises(TypeError, match="unexpected keyword"):
        Message("t", b"x", nonsense=1)
    with pytest.raises(TypeError):
        Message.__init__(object(), "t", b"x")  # not a Message: the reference's error


def test_a_subclass_init_calls_the_c_init() -> None:
    class Child(Message):
        __slots__ = ()

        def __init__(self, topic: str, body: bytes) -> None:
            super().__init__(topic, body, tags="child")

    child = Child("t", b"x")
    assert (child.topic, child.body, child.tags, child.keys) == ("t", b"x", "child", ())


def test_initializer_refuses_what_it_does_not_know() -> None:
    @dataclass(frozen=True, slots=True)
    class Two:
        a: object
        b: object = None

    def ref(self: object, a: object, b: object = None) -> None:
        pass

    ok = ((0, None, None, None), (1, None, None, None))
    assert type(_slots.initializer(Two, ("a", "b"), ok, ref, object())).__name__ == "Init"
    with pytest.raises(TypeError):
        _slots.initializer(Two, ("a", "nope"), ok, ref, object())
    with pytest.raises(TypeError):
        _slots.initializer(Two, ("a", "a"), ok, ref, object())
    with pytest.raises(TypeError):
        _slots.initializer(Two, ("a", "b"), ((7, None, None, None), ok[1]), ref, object())
    with pytest.raises(TypeError):
        _slots.initializer(Two, ("a", "b"), ((2, "not callable", None, None), ok[1]), ref, object())
    with pytest.raises(TypeError):
        _slots.initializer(Two, ("a",), ok, ref, object())
