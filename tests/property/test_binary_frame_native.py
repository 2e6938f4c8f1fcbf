"""A whole ROCKETMQ frame decoded in one C call (``_hdrmap.binary_frame``, used by ``frame.decode_frame``
for a ``bytes`` buffer) is what the reference (``frame._decode_frame_bytes``) gives: the same command,
field by field, and the same end, for any command encoded at any position with any bytes after it; and
for anything else (a frame not yet whole, a JSON frame, a malformed or mutated one, text that is not
UTF-8) the C call answers None and the reference gives its answer (None or its error)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.common import limits
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import LanguageCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.errors import RemoteProtocolError

BINARY_FRAME = frame._BINARY_FRAME
needs_c = pytest.mark.skipif(BINARY_FRAME is None, reason="the C extension is not built (pure Python)")

_texts = st.text(max_size=12)
_keys = st.one_of(_texts, st.sampled_from(["msgId", "queueId", "topic"]))
_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | st.text(min_size=1, max_size=12),
    ext_fields=st.dictionaries(_keys, _texts, max_size=6),
    body=st.binary(max_size=40),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(2**15), 2**15 - 1),
    serialize_type=st.sampled_from([SerializeType.ROCKETMQ, SerializeType.ROCKETMQ, SerializeType.JSON]),
)
_FIELDS = ("code", "opaque", "flag", "remark", "ext_fields", "body", "language", "version", "serialize_type")


def _c(buf: Any, pos: int) -> Any:
    return BINARY_FRAME(buf, pos, limits.frame_bytes_max, frame._LANG_BY_CODE, frame._OTHER, frame._ROCKETMQ)


def _reference(buf: bytes, pos: int) -> Any:
    try:
        return frame._decode_frame_bytes(buf, pos)
    except RemoteProtocolError as exc:
        return exc


def _same(made: tuple[RemotingCommand, int], reference: tuple[RemotingCommand, int]) -> None:
    assert made[1] == reference[1]
    for name in _FIELDS:
        got, want = getattr(made[0], name), getattr(reference[0], name)
        assert type(got) is type(want) and got == want, name
    assert list(made[0].ext_fields.items()) == list(reference[0].ext_fields.items())  # the same order
    assert made[0] == reference[0]


@needs_c
@settings(max_examples=400, deadline=None)
@given(cmd=_commands, lead=st.binary(max_size=6), trailing=st.binary(max_size=12), data=st.data())
def test_c_frame_is_the_references(
    cmd: RemotingCommand, lead: bytes, trailing: bytes, data: st.DataObject
) -> None:
    encoded = frame.encode(cmd)
    buf = lead + encoded + trailing
    pos = len(lead)
    reference = _reference(buf, pos)
    made = _c(buf, pos)
    if cmd.serialize_type is SerializeType.ROCKETMQ:
        assert made is not None  # a whole well-formed ROCKETMQ frame: the C call takes it
        _same(made, reference)
        assert frame.decode_frame(buf, pos) == reference
    else:
        assert made is None
    # any cut: not whole (None from both) or, cut inside the prefix, the reference's answer
    cut = data.draw(st.integers(pos, pos + len(encoded) - 1))
    assert _c(buf[:cut], pos) is None
    assert frame.decode_frame(buf[:cut], pos) == _reference(buf[:cut], pos) or isinstance(
        _reference(buf[:cut], pos), RemoteProtocolError
    )
    # one byte changed anywhere: the C call gives the reference's command or None (then the reference
    # judges: its command, None, or its error)
    at = data.draw(st.integers(0, len(buf) - 1))
    mutated = bytearray(buf)
    mutated[at] = data.draw(st.integers(0, 255))
    changed = bytes(mutated)
    reference = _reference(changed, pos)
    made = _c(changed, pos)
    if made is not None:
        assert isinstance(reference, tuple)
        _same(made, reference)
    if isinstance(reference, RemoteProtocolError):
        with pytest.raises(RemoteProtocolError, match=re.escape(str(reference))):
            frame.decode_frame(changed, pos)
    else:
        assert frame.decode_frame(changed, pos) == reference


@needs_c
@settings(max_examples=300, deadline=None)
@given(buf=st.binary(max_size=64), pos=st.integers(0, 8))
def test_c_frame_on_any_bytes(buf: bytes, pos: int) -> None:
    reference = _reference(buf, pos) if pos <= len(buf) else None
    made = _c(buf, pos)
    if made is not None:
        assert isinstance(reference, tuple)
        _same(made, reference)


@needs_c
def test_c_frame_declines_other_arguments() -> None:
    cmd = RemotingCommand(17, 5, 1, None, {"a": "b"}, b"xy", LanguageCode.JAVA, 1, SerializeType.ROCKETMQ)
    buf = frame.encode(cmd)
    assert _c(buf, 0) is not None
    languages, other, rocketmq = frame._LANG_BY_CODE, frame._OTHER, frame._ROCKETMQ
    for args in [
        (bytearray(buf), 0, limits.frame_bytes_max, languages, other, rocketmq),
        (memoryview(buf), 0, limits.frame_bytes_max, languages, other, rocketmq),
        (buf, -1, limits.frame_bytes_max, languages, other, rocketmq),
        (buf, 2**70, limits.frame_bytes_max, languages, other, rocketmq),
        (buf, True, limits.frame_bytes_max, languages, other, rocketmq),
        (buf, 0, len(buf) - 5, languages, other, rocketmq),  # over the frame limit: the reference raises
        (buf, 0, 2**70, languages, other, rocketmq),
        (buf, 0, limits.frame_bytes_max, list(languages.items()), other, rocketmq),
    ]:
        assert BINARY_FRAME(*args) is None, args[1:3]
    with pytest.raises(TypeError):
        BINARY_FRAME(buf, 0)
    # an unknown language byte: languages.get(code, other), the signed byte
    odd = bytearray(buf)
    odd[8 + 2] = 200
    made = _c(bytes(odd), 0)
    assert made is not None and made[0].language is other
    assert made == frame._decode_frame_bytes(bytes(odd), 0)
