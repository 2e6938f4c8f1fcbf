"""Frame codec: goldens, every table frame whole / byte by byte / with trailing bytes, and bad input."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.remoting_helpers import (
    FRAMES,
    GOLDEN_BINARY_COMMAND,
    GOLDEN_BINARY_FRAME,
    GOLDEN_JSON_COMMAND,
    GOLDEN_JSON_FRAME,
)
from txmq.common import limits
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand, make_request, make_response
from txmq.protocol.remoting.errors import LocalProtocolError, RemoteProtocolError
from txmq.protocol.remoting.headers import send_response_fields


def test_golden_json_frame() -> None:
    assert frame.encode(GOLDEN_JSON_COMMAND) == GOLDEN_JSON_FRAME
    assert frame.decode(GOLDEN_JSON_FRAME) == GOLDEN_JSON_COMMAND


def test_golden_binary_frame() -> None:
    assert frame.encode(GOLDEN_BINARY_COMMAND) == GOLDEN_BINARY_FRAME
    assert frame.decode(GOLDEN_BINARY_FRAME) == GOLDEN_BINARY_COMMAND


@pytest.mark.parametrize(("cmd", "data"), FRAMES)
def test_whole(cmd: RemotingCommand, data: bytes) -> None:
    assert frame.decode_frame(data) == (cmd, len(data))


@pytest.mark.parametrize(("cmd", "data"), FRAMES)
def test_byte_by_byte_no_early_event(cmd: RemotingCommand, data: bytes) -> None:
    step = 1 if len(data) < 2000 else 997  # keep the 70 KB frame fast; still crosses every boundary
    for cut in [*range(min(len(data), 40)), *range(40, len(data), step)]:
        assert frame.decode_frame(data[:cut]) is None, cut
    assert frame.decode_frame(data) == (cmd, len(data))


@pytest.mark.parametrize(("cmd", "data"), FRAMES)
def test_trailing_bytes_untouched(cmd: RemotingCommand, data: bytes) -> None:
    trailing = b"\x00\x00\x00\x04garbage-that-is-not-looked-at"
    buf = bytearray(b"prefix" + data + trailing)
    assert frame.decode_frame(buf, 6) == (cmd, 6 + len(data))
    assert bytes(buf) == b"prefix" + data + trailing
    with pytest.raises(RemoteProtocolError, match="after the end"):
        frame.decode(data + trailing)


def _frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body
    )


BAD = {
    "negative length": struct.pack(">iI", -1, 0),
    "length below 4": struct.pack(">iI", 3, 0),
    "length over limit": struct.pack(">i", limits.frame_bytes_max + 1),
    "header longer than frame": struct.pack(">iI", 10, 7) + b"x" * 10,
    "unknown serialize type": _frame(b"{}", serialize_type=2),
    "invalid JSON": _frame(b"{"),
    "invalid UTF-8": _frame(b'{"remark":"\xff"}'),
    "not an object": _frame(b"[]"),
    "deep nesting": _frame(b"[" * 100_000),
    "code not a number": _frame(b'{"code":"ten"}'),
    "code a float": _frame(b'{"code":1.5}'),
    "remark not a string": _frame(b'{"remark":5}'),
    "extFields a list": _frame(b'{"extFields":[]}'),
    "extFields nested": _frame(b'{"extFields":{"a":{}}}'),
    "binary too short": _frame(b"\x00" * 20, serialize_type=1),
    "binary remark overruns": _frame(bytes(13) + struct.pack(">i", 99) + bytes(4), serialize_type=1),
    "binary negative ext": _frame(bytes(13) + struct.pack(">ii", 0, -1), serialize_type=1),
    "binary key overruns": _frame(bytes(13) + struct.pack(">iih", 0, 2, 40), serialize_type=1),
    "binary stray bytes": _frame(bytes(13) + struct.pack(">ii", 0, 0) + b"!", serialize_type=1),
    "binary bad UTF-8": _frame(bytes(13) + struct.pack(">i", 1) + b"\xff" + bytes(4), serialize_type=1),
}


@pytest.mark.parametrize("data", BAD.values(), ids=list(BAD))
def test_malformed_frames_raise_remote_protocol_error(data: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        frame.decode_frame(data)


def test_bad_length_detected_from_the_first_four_bytes() -> None:
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        frame.decode_frame(struct.pack(">i", limits.frame_bytes_max + 1))
    assert frame.decode_frame(struct.pack(">i", limits.frame_bytes_max)) is None


def test_ali_ons_numbers_and_booleans_are_coerced() -> None:
    header = {
        "code": 310, "language": "NODE_JS", "version": 121, "opaque": 3, "flag": 0,
        "extFields": {"a": "PID", "d": 4, "g": 1795345299392, "k": False, "x": True, "n": None, "f": 1.5},
    }  # fmt: skip
    cmd = frame.decode(_frame(json.dumps(header).encode()))
    assert cmd.ext_fields == {
        "a": "PID",
        "d": "4",
        "g": "1795345299392",
        "k": "false",
        "x": "true",
        "f": "1.5",
    }
    assert cmd.language is LanguageCode.NODE_JS
    assert cmd.version == 121


def test_lenient_json_defaults_and_unknown_language() -> None:
    cmd = frame.decode(_frame(b'{"language":"COBOL","code":"17","serializeTypeCurrentRPC":"JSON"}', b"b"))
    assert cmd == RemotingCommand(code=17, language=LanguageCode.OTHER, body=b"b")
    assert frame.decode(_frame(b"{}")).language is LanguageCode.JAVA


def test_binary_header_cannot_carry_wide_codes() -> None:
    with pytest.raises(LocalProtocolError):
        frame.encode(RemotingCommand(code=200050, serialize_type=SerializeType.ROCKETMQ))


def test_oversized_frame_is_refused_on_encode() -> None:
    with pytest.raises(LocalProtocolError):
        frame.encode(RemotingCommand(code=10, body=bytes(limits.frame_bytes_max)))


@given(
    opaque=st.integers(-(2**31), 2**31 - 1),
    version=st.integers(-(2**15), 2**15 - 1),
    serialize=st.sampled_from(list(SerializeType)),
    msg_id=st.text(max_size=40),
    queue_id=st.integers(-(2**31), 2**31 - 1),
    queue_offset=st.integers(-(2**63), 2**63 - 1),
    transaction_id=st.none() | st.text(max_size=40),
)
def test_encode_send_response_is_the_general_encoding(
    opaque: int,
    version: int,
    serialize: SerializeType,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    transaction_id: str | None,
) -> None:
    """Also for a half's answer, which carries a transaction id."""
    request = make_request(
        RequestCode.SEND_MESSAGE_V2, opaque, {"a": "g"}, version=version, serialize_type=serialize
    )
    fields = send_response_fields(msg_id, queue_id, queue_offset, transaction_id)
    expected = frame.encode(make_response(request, ResponseCode.SUCCESS, ext_fields=fields))
    assert frame.encode_send_response(request, msg_id, queue_id, queue_offset, transaction_id) == expected


@given(
    opaque=st.integers(-(2**31), 2**31 - 1),
    version=st.integers(-(2**15), 2**15 - 1),
    serialize=st.sampled_from(list(SerializeType)),
    language=st.sampled_from(list(LanguageCode)),
    oneway=st.booleans(),
)
def test_encode_success_response_is_the_general_encoding(
    opaque: int, version: int, serialize: SerializeType, language: LanguageCode, oneway: bool
) -> None:
    """END_TRANSACTION's answer: no remark, no fields, no body; the language is the broker's."""
    request = make_request(
        RequestCode.END_TRANSACTION, opaque, {"commitOrRollback": "8"}, version=version,
        serialize_type=serialize, language=language, oneway=oneway,
    )  # fmt: skip
    expected = frame.encode(make_response(request, ResponseCode.SUCCESS))
    assert frame.encode_success_response(request) == expected
