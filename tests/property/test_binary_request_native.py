"""The C request frame (``_hdrmap.binary_request``, used by ``frame.encode_binary_request``) is the
reference's (``frame.encode_binary_request_py``) byte for byte; values that do not fit, a frame over the
limit and other types are left to the reference (None), so ``encode_binary_request`` raises its errors.
(tests/property/test_remoting_binary.py holds ``encode_binary_request`` to the generic ``frame.encode``.)"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from txmq.common import limits
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import LanguageCode

BINARY_REQUEST = frame._BINARY_REQUEST
needs_c = pytest.mark.skipif(BINARY_REQUEST is None, reason="the C module is not built (pure Python)")


def _outcome(fn: Any, *args: Any) -> tuple[str, object]:
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # the error's type and message are what is compared
        return ("error", (type(exc), str(exc)))


_I16 = st.integers(-(2**15), 2**15 - 1)
_I32 = st.integers(-(2**31), 2**31 - 1)
_ANY_INT = st.integers(-(2**70), 2**70) | _I16 | _I32


@needs_c
@given(
    code=_I16 | _ANY_INT,
    language=st.sampled_from(list(LanguageCode)) | st.integers(-200, 200),
    version=_I16 | _ANY_INT,
    opaque=_I32 | _ANY_INT,
    flag=st.sampled_from([0, 1, 2, 3]) | _ANY_INT,
    ext=st.binary(max_size=80),
    body=st.binary(max_size=300),
)
@example(code=2**15, language=LanguageCode.PYTHON, version=0, opaque=0, flag=0, ext=b"", body=b"")
@example(code=0, language=LanguageCode.PYTHON, version=-(2**15) - 1, opaque=0, flag=0, ext=b"", body=b"")
@example(code=0, language=128, version=0, opaque=2**31, flag=0, ext=b"", body=b"")
def test_c_frame_is_the_references_frame(
    code: int, language: int, version: int, opaque: int, flag: int, ext: bytes, body: bytes
) -> None:
    args = (code, language, version, opaque, flag, ext, body)
    expected = _outcome(frame.encode_binary_request_py, *args)
    made = BINARY_REQUEST(*args, limits.frame_bytes_max)
    if made is not None:
        assert expected == ("ok", made)
        assert type(made) is bytes
    assert _outcome(frame.encode_binary_request, *args) == expected


@needs_c
@given(st.integers(0, 64), st.integers(0, 64), st.integers(29, 200))
def test_a_frame_over_the_limit_is_left_to_the_reference(ext_len: int, body_len: int, frame_max: int) -> None:
    ext, body = b"e" * ext_len, b"b" * body_len
    made = BINARY_REQUEST(10, LanguageCode.PYTHON, 1, 7, 0, ext, body, frame_max)
    length = 4 + 21 + ext_len + body_len  # the frame's length field (the 4-byte prefix not counted)
    if length > frame_max:
        assert made is None
    else:
        assert made == frame.encode_binary_request_py(10, LanguageCode.PYTHON, 1, 7, 0, ext, body)


@needs_c
def test_other_types_are_left_to_the_reference() -> None:
    good: list[Any] = [10, LanguageCode.PYTHON, 1, 7, 0, b"e", b"b", limits.frame_bytes_max]
    assert BINARY_REQUEST(*good) == frame.encode_binary_request_py(*good[:7])
    for i, odd in [(0, 1.0), (1, "1"), (3, None), (5, bytearray(b"e")), (6, memoryview(b"b")), (7, 2.5)]:
        args = list(good)
        args[i] = odd
        assert BINARY_REQUEST(*args) is None
    with pytest.raises(TypeError):
        BINARY_REQUEST(*good[:7])
