"""A cheaper ``__init__`` for frozen slotted dataclasses built once per delivered message.

A frozen dataclass's generated ``__init__`` stores every field with ``object.__setattr__(self, name,
value)``: for ``MessageView``'s 23 fields that is most of the cost of building one, and a receive
builds one per message. :func:`slot_init` replaces it with an ``__init__`` of the same signature
(names, order, defaults, default factories) that stores each field through its slot descriptor. The
class stays frozen (its ``__setattr__`` still raises) and everything else (eq, hash, repr, replace,
pickling) is the dataclass's own.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")
_FACTORY = object()  # marks "no argument given" for a field with a default factory


def slot_init(cls: type[T], coerce: Mapping[str, tuple[type, Callable[[Any], Any]]] | None = None) -> type[T]:
    """``coerce``: field name -> (its type, a converter) for a field whose argument is converted
    when it is not exactly of that type (``Message.body``: a bytearray or memoryview stored as bytes)."""
    coerce = coerce or {}
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if not all(f.init and not f.kw_only for f in fields) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: slot_init handles positional init fields only")
    env: dict[str, Any] = {"_FACTORY": _FACTORY}
    params: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        env[f"_set{i}"] = cls.__dict__[f.name].__set__  # the slot's member descriptor
        if f.default is not dataclasses.MISSING:
            env[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_factory{i}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _factory{i}()")
        else:
            params.append(f.name)
        if f.name in coerce:
            env[f"_type{i}"], env[f"_convert{i}"] = coerce[f.name]
            body.append(f"    if type({f.name}) is not _type{i}:\n        {f.name} = _convert{i}({f.name})")
        body.append(f"    _set{i}(self, {f.name})")
    if unknown := set(coerce) - {f.name for f in fields}:
        raise TypeError(f"{cls.__name__}: slot_init cannot coerce {sorted(unknown)}: no such field")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(source, env)  # generated from the class's own field list, as dataclasses does
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = _native_init(cls, fields, coerce, init)  # type: ignore[method-assign]
    return cls


def _native_init(
    cls: type,
    fields: tuple[dataclasses.Field[Any], ...],
    coerce: Mapping[str, tuple[type, Callable[[Any], Any]]],
    init: Callable[..., None],
) -> Any:
    """``init`` (slot_init's generated ``__init__``, the reference) done in C by ``common/_slots.c``'s
    ``initializer`` when it is built: a call it understands binds and stores the fields there (~10x
    fewer instructions: one is made per message sent, a batch's 100 cost ~0.86M in Python), any
    other call runs ``init`` itself, which raises its own error (tests/property/test_slots_init.py).
    ``init`` as it is without the extension (``TXMQ_PURE=1``, no compiler) or for a class it refuses."""
    try:
        module = importlib.import_module("txmq.common._slots")
    except ImportError:
        return init
    specs: list[tuple[int, Any, Any, Any]] = []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            kind, value = 1, f.default
        elif f.default_factory is not dataclasses.MISSING:
            kind, value = 2, f.default_factory
        else:
            kind, value = 0, None
        coerced_type, converter = coerce.get(f.name, (None, None))
        specs.append((kind, value, coerced_type, converter))
    try:
        made = module.initializer(cls, tuple(f.name for f in fields), tuple(specs), init, _FACTORY)
    except TypeError:
        return init
    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(made, name, getattr(init, name))
    return made


def slot_maker_py(cls: type[T], names: tuple[str, ...]) -> Callable[..., T]:
    """The reference of :func:`slot_maker`: ``maker(*values)`` is ``object.__new__(cls)`` with
    ``cls.__dict__[names[i]].__set__(obj, values[i])`` for each field, in order (no ``__init__``)."""
    setters = tuple(cls.__dict__[name].__set__ for name in names)
    count = len(setters)
    new = object.__new__

    def make(*values: Any) -> T:
        if len(values) != count:
            raise TypeError(f"{cls.__name__} maker takes {count} values, {len(values)} given")
        obj: T = new(cls)
        for setter, value in zip(setters, values, strict=True):
            setter(obj, value)
        return obj

    return make


def slot_maker(cls: type[T], names: tuple[str, ...]) -> Callable[..., T]:
    """A callable making a ``cls`` (a frozen slotted dataclass) from its field values in order,
    without running ``__init__``: for code that builds one per message and has every value at hand.

    ``names`` must be the dataclass's fields, in order (a changed class fails here, at import, not
    with a half-filled object). With the C extension ``common/_slots.c`` built, one C call allocates
    the instance and stores each value in its slot; without it (``TXMQ_PURE=1``, no compiler) or
    for a class it does not take, :func:`slot_maker_py`, the reference it is tested against
    (tests/property/test_slots_native.py)."""
    fields = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if fields != names:
        raise AssertionError(f"{cls.__name__}'s fields changed: {fields} are not {names}")
    try:
        maker: Callable[..., T] = importlib.import_module("txmq.common._slots").maker(cls, names)
    except (ImportError, TypeError):
        return slot_maker_py(cls, names)
    return maker


def tuple_maker_py(cls: type[T], count: int) -> Callable[..., T]:
    """The reference of :func:`tuple_maker`: ``maker(*values)`` is ``tuple.__new__(cls, values)``
    (the class's own ``__new__`` not run), for exactly ``count`` values."""
    new = tuple.__new__

    def make(*values: Any) -> T:
        if len(values) != count:
            raise TypeError(f"{cls.__name__} maker takes {count} values, {len(values)} given")
        made: T = new(cls, values)  # type: ignore[type-var]
        return made

    return make


def tuple_maker(cls: type[T]) -> Callable[..., T]:
    """A callable making a ``cls`` (a ``NamedTuple`` class) from its field values in order, as
    ``tuple.__new__(cls, values)`` does (no interpreted ``NamedTuple.__new__``), for code that builds
    one per message: with ``common/_slots.c`` built, one C call allocates the instance and stores its
    items (no argument tuple copied); without it, or for a class it does not take,
    :func:`tuple_maker_py`, the reference it is tested against (tests/property/test_slots_native.py)."""
    count = len(cls._fields)  # type: ignore[attr-defined]
    try:
        maker: Callable[..., T] = importlib.import_module("txmq.common._slots").tuple_maker(cls, count)
    except (ImportError, TypeError):
        return tuple_maker_py(cls, count)
    return maker
