"""The ROCKETMQ binary header: any command round-trips whole, byte by byte and with trailing bytes;
any header bytes decode exactly as a plain struct-based reading of protocol.md §6.1 does (the same
command, or ``RemoteProtocolError`` with the same message); the pre-rendered request and response
encoders write the bytes ``encode`` writes."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import LanguageCode, RequestCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand, make_request, make_response
from txmq.protocol.remoting.errors import RemoteProtocolError

_ROCKETMQ = SerializeType.ROCKETMQ
_texts = st.text(max_size=12)
_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | st.text(min_size=1, max_size=12),
    ext_fields=st.dictionaries(_texts, _texts, max_size=6),
    body=st.binary(max_size=40),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(2**15), 2**15 - 1),
    serialize_type=st.just(_ROCKETMQ),
)


@given(_commands)
def test_round_trip_whole_byte_by_byte_and_with_trailing_bytes(cmd: RemotingCommand) -> None:
    data = frame.encode(cmd)
    assert frame.decode(data) == cmd
    for cut in range(len(data)):
        assert frame.decode_frame(data[:cut]) is None
    trailing = b"\x00\x00\x00\x05more!"
    assert frame.decode_frame(bytearray(b"xy" + data + trailing), 2) == (cmd, 2 + len(data))


def _reference(header: bytes, body: bytes) -> RemotingCommand:
    """protocol.md §6.1 read with struct, one field at a time (the decoder before hdrdecode)."""
    if len(header) < 21:
        raise RemoteProtocolError(f"ROCKETMQ header of {len(header)} bytes is too short")
    code, language, version, opaque, flag = struct.unpack_from(">hbhii", header, 0)

    def chunk(data: bytes, pos: int, width: int, what: str) -> tuple[bytes, int]:
        if pos + width > len(data):
            raise RemoteProtocolError(f"ROCKETMQ header truncated before the {what} length")
        size = struct.unpack_from(">h" if width == 2 else ">i", data, pos)[0]
        pos += width
        if size < 0 or pos + size > len(data):
            raise RemoteProtocolError(f"ROCKETMQ header {what} length {size} is out of bounds")
        return data[pos : pos + size], pos + size

    remark_bytes, pos = chunk(header, 13, 4, "remark")
    ext_bytes, pos = chunk(header, pos, 4, "extFields")
    if pos != len(header):
        raise RemoteProtocolError(f"{len(header) - pos} stray bytes after the ROCKETMQ header")
    try:
        remark = remark_bytes.decode("utf-8") if remark_bytes else None
        ext: dict[str, str] = {}
        pos = 0
        while pos < len(ext_bytes):
            key, pos = chunk(ext_bytes, pos, 2, "extFields key")
            value, pos = chunk(ext_bytes, pos, 4, "extFields value")
            ext[key.decode("utf-8")] = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"ROCKETMQ header text is not UTF-8: {exc}") from None
    lang = {m.value: m for m in LanguageCode}.get(language, LanguageCode.OTHER)
    return RemotingCommand(code, opaque, flag, remark, ext, body, lang, version, _ROCKETMQ)


def _outcome(decode: object, header: bytes) -> object:
    try:
        return decode(header, b"body")  # type: ignore[operator]
    except RemoteProtocolError as exc:
        return ("error", str(exc))


def _frame_of(header: bytes) -> bytes:
    return struct.pack(">iI", 4 + len(header) + 4, (1 << 24) | len(header)) + header + b"body"


# headers near the real shape: a fixed part, then length-prefixed pieces whose lengths may lie
_piece = st.tuples(st.sampled_from([2, 4]), st.integers(-3, 12), st.binary(max_size=10)).map(
    lambda t: (struct.pack(">h", t[1]) if t[0] == 2 else struct.pack(">i", t[1])) + t[2]
)
_shaped = st.tuples(st.binary(min_size=13, max_size=13), st.lists(_piece, max_size=6)).map(
    lambda t: t[0] + b"".join(t[1])
)


@given(st.binary(max_size=64) | _shaped)
def test_any_header_decodes_as_the_reference_reading(header: bytes) -> None:
    expected = _outcome(_reference, header)
    assert _outcome(frame._decode_binary, header) == expected
    # and through the frame decoder: the command, or RemoteProtocolError (never anything else)
    assert _outcome(lambda h, _b: frame.decode(_frame_of(h)), header) == expected


@given(
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    oneway=st.booleans(),
    ext=st.dictionaries(_texts, _texts, max_size=6),
    body=st.binary(max_size=40),
)
def test_encode_binary_request_is_the_general_encoding(
    code: int,
    language: LanguageCode,
    version: int,
    opaque: int,
    oneway: bool,
    ext: dict[str, str],
    body: bytes,
) -> None:
    cmd = make_request(
        code, opaque, ext, body, oneway=oneway, language=language, version=version, serialize_type=_ROCKETMQ
    )
    data = frame.encode_binary_request(code, language, version, opaque, cmd.flag, frame.binary_ext(ext), body)
    assert data == frame.encode(cmd)


@given(st.dictionaries(_texts, _texts, max_size=6))
def test_binary_ext_is_the_general_encoding(ext: dict[str, str]) -> None:
    cmd = RemotingCommand(code=1, ext_fields=ext, serialize_type=_ROCKETMQ)
    assert frame.encode_binary_header(cmd).endswith(
        struct.pack(">i", len(frame.binary_ext(ext))) + frame.binary_ext(ext)
    )


def test_a_binary_request_is_answered_in_binary() -> None:
    """As Apache's broker does (the response takes the request's serialize type)."""
    request = make_request(RequestCode.SEND_MESSAGE_V2, 9, {"a": "g"}, b"x", serialize_type=_ROCKETMQ)
    answer = frame.decode(frame.encode_send_response(request, "ID", 3, 77, "T"))
    assert answer == make_response(
        request, 0, ext_fields={"msgId": "ID", "queueId": "3", "queueOffset": "77", "transactionId": "T"}
    )
    assert answer.serialize_type is _ROCKETMQ
    assert frame.decode(frame.encode_success_response(request)) == make_response(request, 0)
