"""The C extFields reader (``protocol/remoting/_hdrmap.c``) gives what the Python reference gives.

``frame._binary_map`` asks the C module first and runs ``frame._binary_map_py`` (the reference, and
the only path without the module or with ``TXMQ_PURE=1``) when it is absent or answers None. On
generated maps (common field names, ASCII, non-ASCII, empty strings, a key named twice) the C dict
equals the reference's, in the same order, of exact ``str``; on truncated, mutated and arbitrary
bytes (lengths out of bounds, invalid UTF-8) the C module answers None exactly when the reference
raises, and ``_binary_map`` raises the same error with the same message. The C command maker
(``command.new_command``) builds what ``command.new_command_py`` builds. The C send answer
(``frame.encode_offset_answer``) renders the bytes ``frame.encode_send_response`` renders.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.protocol.remoting import command, frame
from txmq.protocol.remoting.codes import LanguageCode, SerializeType

HDRMAP = frame._HDRMAP
needs_c = pytest.mark.skipif(HDRMAP is None, reason="the C module is not built (pure Python)")

_NAMES = st.sampled_from(
    ["producerGroup", "msgId", "queueId", "queueOffset", "transactionId", "a", "n", "true", "false", "TBW102",
     "", "é", "x" * 40, "commitLogOffsetX", "msgI"]
)  # fmt: skip
_TEXT = _NAMES | st.text(max_size=12) | st.text(alphabet=st.characters(max_codepoint=127), max_size=200)
_PAIRS = st.lists(st.tuples(_TEXT, _TEXT), max_size=12)


def _render(pairs: list[tuple[str, str]]) -> bytes:
    return b"".join(frame.binary_pair(key, value) for key, value in pairs)


def _outcome(fn: object, data: bytes, pos: int) -> tuple[str, object]:
    try:
        result = fn(data, pos)  # type: ignore[operator]
    except Exception as exc:  # the error's type and message are what is compared
        return ("error", (type(exc), str(exc)))
    return ("ok", None if result is None else list(result.items()))


@needs_c
@given(_PAIRS, st.binary(max_size=8))
@example([("producerGroup", "g"), ("msgId", "1"), ("producerGroup", "h")], b"")
def test_c_map_equals_the_reference(pairs: list[tuple[str, str]], prefix: bytes) -> None:
    data = prefix + _render(pairs)
    expected = frame._binary_map_py(data, len(prefix))
    got = HDRMAP(data, len(prefix))
    assert got == expected
    assert list(got.items()) == list(expected.items())
    assert all(type(k) is str and type(v) is str for k, v in got.items())
    assert frame._binary_map(data, len(prefix)) == expected


@needs_c
@settings(max_examples=300)
@given(_PAIRS, st.data())
@example([("a", "é")], None)
def test_c_and_reference_agree_on_broken_maps(
    pairs: list[tuple[str, str]], data: st.DataObject | None
) -> None:
    raw = bytearray(_render(pairs))
    if data is not None and raw:
        for _ in range(data.draw(st.integers(0, 3))):  # a few bytes changed (lengths, UTF-8 bytes)
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xC3, 0xFF]))
        raw = raw[: data.draw(st.integers(0, len(raw)))]  # truncated anywhere
    blob = bytes(raw)
    reference = _outcome(frame._binary_map_py, blob, 0)
    c = _outcome(HDRMAP, blob, 0)
    assert c == (reference if reference[0] == "ok" else ("ok", None))
    assert _outcome(frame._binary_map, blob, 0) == reference


@needs_c
@given(st.binary(max_size=64), st.integers(0, 70))
@example(b"\x00\x01\xff\x00\x00\x00\x00", 0)  # a key that is not UTF-8
@example(b"\x00\x01a\x00\x00\x00\x01\xff", 0)  # a value that is not UTF-8
@example(b"\xff\xff", 0)  # a negative key length
@example(b"\x00\x00\xff\xff\xff\xff", 0)  # a negative value length
def test_c_and_reference_agree_on_any_bytes(blob: bytes, pos: int) -> None:
    reference = _outcome(frame._binary_map_py, blob, pos)
    assert _outcome(HDRMAP, blob, pos) == (reference if reference[0] == "ok" else ("ok", None))
    assert _outcome(frame._binary_map, blob, pos) == reference


@needs_c
def test_the_c_table_is_interned_text() -> None:
    names = importlib.import_module("txmq.protocol.remoting._hdrmap").common_names()
    assert len(set(names)) == len(names)
    for name in names:
        assert type(name) is str and name.isascii() and sys.intern(name) is name


@needs_c
def test_not_bytes_is_left_to_the_reference() -> None:
    assert HDRMAP(bytearray(b"\x00\x01a\x00\x00\x00\x00"), 0) is None
    assert HDRMAP(b"\x00\x01a\x00\x00\x00\x00", -1) is None
    assert HDRMAP(b"\x00\x01a\x00\x00\x00\x00", 0) == {"a": ""}


def test_pure_python_runs_without_the_c_module() -> None:
    env = dict(os.environ, TXMQ_PURE="1")
    code = "from txmq.protocol.remoting import frame; print(frame._HDRMAP is None, frame._binary_map(b'', 0))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "{}"]


_COMMAND_FIELDS = st.tuples(
    st.integers(-(1 << 40), 1 << 40),
    st.integers(-(1 << 31), (1 << 31) - 1),
    st.integers(0, 3),
    st.none() | st.text(max_size=8),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    st.binary(max_size=16),
    st.sampled_from(list(LanguageCode)),
    st.integers(-5, 500),
    st.sampled_from(list(SerializeType)),
)


@needs_c
@given(_COMMAND_FIELDS)
def test_c_command_is_the_references_command(values: tuple[Any, ...]) -> None:
    """``new_command`` (the C maker) against ``new_command_py``: the same class, equal, each field the
    very object given (an int: an equal int), still frozen, tracked by the GC like any instance."""
    got = command.new_command(*values)
    want = command.new_command_py(*values)
    assert type(got) is type(want) is command.RemotingCommand
    assert got == want
    assert repr(got) == repr(want)
    for f, value in zip(dataclasses.fields(command.RemotingCommand), values, strict=True):
        stored = getattr(got, f.name)
        if type(value) is int:  # compiled, an int argument is unboxed and boxed again
            assert type(stored) is int and stored == value == getattr(want, f.name)
        else:
            assert stored is value
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.code = 1  # type: ignore[misc]
    assert gc.is_tracked(got) == gc.is_tracked(want)
    assert dataclasses.replace(got, code=5) == dataclasses.replace(want, code=5)


@needs_c
def test_bind_command_refuses_what_is_not_a_slot_class() -> None:
    module = importlib.import_module("txmq.protocol.remoting._hdrmap")
    cls = command.RemotingCommand
    descriptors = tuple(cls.__dict__[f.name] for f in dataclasses.fields(cls))
    with pytest.raises(TypeError):
        module.bind_command(command.RemotingCommand, descriptors[:8])

    class Plain:
        pass

    with pytest.raises(TypeError):
        module.bind_command(Plain, descriptors)  # the descriptors are another class's
    with pytest.raises(TypeError):
        module.bind_command(command.RemotingCommand, (property(lambda self: 0),) * 9)
    module.bind_command(command.RemotingCommand, descriptors)  # as command.py bound it
    ext: dict[str, str] = {}
    values = (1, 2, 3, None, ext, b"", LanguageCode.JAVA, 0, SerializeType.JSON)
    assert command.new_command(*values) == command.new_command_py(*values)


SEND_ANSWER = frame._SEND_ANSWER
_ANSWER_NUMBERS = st.integers(-(2**63), 2**63 - 1) | st.sampled_from([-(2**63) - 1, 2**63, 2**64 - 1, 2**70])


@needs_c
@settings(max_examples=500)
@given(
    version=st.integers(-(2**15), 2**15 - 1) | st.sampled_from([-(2**15) - 1, 2**15, 2**40]),
    opaque=st.integers(-(2**31), 2**31 - 1) | st.sampled_from([-(2**31) - 1, 2**31, 2**64]),
    prefix=st.sampled_from(["", "AC11000200002A9F", "x" * 111, "x" * 112, "é", "\x00\x7f"])
    | st.text(max_size=20),
    physical_offset=st.integers(0, 2**64 - 1) | st.sampled_from([0, 2**63 - 1, 2**63, 2**64 - 1]),
    queue_id=_ANSWER_NUMBERS,
    queue_offset=_ANSWER_NUMBERS,
    serialize=st.sampled_from(list(SerializeType)),
)
@example(
    version=317, opaque=7, prefix="AC11000200002A9F", physical_offset=1 << 40, queue_id=3, queue_offset=99,
    serialize=SerializeType.ROCKETMQ,
)  # fmt: skip
def test_c_send_answer_is_the_reference_answer(
    version: int,
    opaque: int,
    prefix: str,
    physical_offset: int,
    queue_id: int,
    queue_offset: int,
    serialize: SerializeType,
) -> None:
    """``frame.encode_offset_answer`` (``_hdrmap.send_answer``) renders the bytes of
    ``encode_send_response`` with the offset message id (``send.hex16``), or declines: exactly for a
    JSON request, a version beyond int16, an opaque beyond int32, a prefix not ASCII or of 112
    characters or more, a physical offset of 2**63 or more, a queue number beyond 64 bits."""
    from txmq.broker.send import hex16

    request = command.RemotingCommand(code=310, opaque=opaque, version=version, serialize_type=serialize)
    got = frame.encode_offset_answer(request, prefix, physical_offset, queue_id, queue_offset)
    declines = (
        serialize is SerializeType.JSON
        or not -(2**15) <= version < 2**15
        or not -(2**31) <= opaque < 2**31
        or not (prefix.isascii() and len(prefix) < 112)
        or physical_offset >= 2**63
        or not -(2**63) <= queue_id < 2**63
        or not -(2**63) <= queue_offset < 2**63
    )
    if declines:
        assert got is None
        return
    assert got == frame.encode_send_response(request, prefix + hex16(physical_offset), queue_id, queue_offset)
    assert type(got) is bytes


@needs_c
def test_c_send_answer_leaves_odd_types_to_the_reference() -> None:
    assert SEND_ANSWER(0, 1, "P", 5, 0, 0) is not None
    assert SEND_ANSWER(0, 1, "P", 5, True, 0) is None  # not an exact int
    assert SEND_ANSWER(0, 1, b"P", 5, 0, 0) is None
    assert SEND_ANSWER(0.0, 1, "P", 5, 0, 0) is None
    assert SEND_ANSWER(0, 1, "P", -1, 0, 0) is None


def test_pure_python_renders_every_answer() -> None:
    env = dict(os.environ, TXMQ_PURE="1")
    code = "from txmq.protocol.remoting import frame; print(frame._SEND_ANSWER is None)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]
