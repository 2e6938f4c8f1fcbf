"""Remoting frames: ``RemotingCommand`` <-> bytes, with both header serializations.

Layout (all integers big-endian)::

    int32  length        = 4 + headerLen + bodyLen   (excludes itself; 4 <= length <= frame_bytes_max)
    int32  (serializeType << 24) | headerLen          serializeType: 0 JSON, 1 ROCKETMQ
    bytes  header        headerLen bytes
    bytes  body          the rest

JSON header: ``{"code", "language": "JAVA", "version", "opaque", "flag", "remark"?, "extFields",
"serializeTypeCurrentRPC": "JSON"}``. ROCKETMQ header: ``int16 code, int8 language, int16 version,
int32 opaque, int32 flag, int32 remarkLen + remark, int32 extLen + (int16 kLen, k, int32 vLen, v)*``.

Decoding never raises anything but ``RemoteProtocolError`` on bad input; the bounds are checked as
soon as the 8-byte prefix is available so a hostile length never makes us buffer more than one
maximal frame. Encoding raises ``LocalProtocolError`` for commands the chosen header cannot carry.
"""

from __future__ import annotations

import importlib
import json
import struct
from collections.abc import Callable
from typing import Any, Final

from txmq.common import limits
from txmq.protocol.remoting.codes import LanguageCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand, make_response, new_command
from txmq.protocol.remoting.errors import LocalProtocolError, RemoteProtocolError

PREFIX_BYTES: Final = 8  # the length word and the serialize-type/header-length word
_PREFIX = struct.Struct(">iI")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_BIN_FIXED_BYTES: Final = _BIN_FIXED.size  # 13
# a ROCKETMQ frame's prefix, fixed header, remark length and extFields length: one pack per frame
_BIN_HEAD = struct.Struct(">iIhbhiiii")
_BIN_WORD: Final = 1 << 24  # SerializeType.ROCKETMQ in the serialize-type/header-length word

_dumps = json.JSONEncoder(separators=(",", ":")).encode
# the C string escaper _dumps itself uses (ensure_ascii): extFields of str written with it directly
_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii
_loads = json.JSONDecoder().decode
# the decoder's C scanner, called directly to skip two Python-level wrappers and a regex per frame
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_LANG_BY_NAME: Final = {member.name: member for member in LanguageCode}
_LANG_BY_CODE: Final = {member.value: member for member in LanguageCode}
_LANG_NAME: Final = {member: member.name for member in LanguageCode}
_SERIALIZE_TYPES: Final = {member.value: member for member in SerializeType}
# enum members read per frame: module constants (a compiled module reads them without an attribute lookup)
_OTHER: Final = LanguageCode.OTHER
_JAVA: Final = LanguageCode.JAVA
_JSON: Final = SerializeType.JSON
_ROCKETMQ: Final = SerializeType.ROCKETMQ


# ---------------------------------------------------------------------------------------------- encoding


def encode(cmd: RemotingCommand) -> bytes:
    """One complete frame for ``cmd``, with the header serialization ``cmd.serialize_type`` names."""
    prefix, header = _prefix_and_header(cmd)
    return b"".join((prefix, header, cmd.body))


def encode_parts(cmd: RemotingCommand) -> tuple[bytes, bytes]:
    """``encode(cmd)`` as its head (the prefix and the header) and its body, not joined: a large body
    goes to the socket as it is (``transport.writelines``) instead of being copied into one frame.
    ``head + body == encode(cmd)``; the same checks and errors."""
    prefix, header = _prefix_and_header(cmd)
    return prefix + header, cmd.body


def _prefix_and_header(cmd: RemotingCommand) -> tuple[bytes, bytes]:
    """The length prefix and the serialized header of ``cmd``'s frame; refuses a frame over the limit."""
    if cmd.serialize_type is SerializeType.JSON:
        header = encode_json_header(cmd)
    else:
        header = encode_binary_header(cmd)
    length = 4 + len(header) + len(cmd.body)
    if length > limits.frame_bytes_max:
        raise LocalProtocolError(f"frame of {length} bytes exceeds the limit of {limits.frame_bytes_max}")
    return _PREFIX.pack(length, (cmd.serialize_type << 24) | len(header)), header


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header (fastjson field names; ``remark`` omitted when None, as fastjson does).

    Built as text around one C-accelerated dump of extFields: about a third cheaper than dumping a
    dict of the whole header.
    """
    remark = "" if cmd.remark is None else ',"remark":' + _dumps(cmd.remark)
    text = (
        f'{{"code":{int(cmd.code)},"language":"{_LANG_NAME[cmd.language]}","version":{int(cmd.version)},'
        f'"opaque":{int(cmd.opaque)},"flag":{int(cmd.flag)}{remark},"extFields":{_ext_json(cmd.ext_fields)},'
        '"serializeTypeCurrentRPC":"JSON"}'
    )
    return text.encode("ascii")


def encode_json_request(
    code: int, language: LanguageCode, version: int, opaque: int, flag: int, ext_json: str, body: bytes
) -> bytes:
    """``encode`` of a JSON request without remark whose extFields are already rendered as
    ``ext_json`` (the SDK renders a send header's constant fields once per queue; see
    ``_remoting.SendHeaders``; tests/unit/test_remoting_frame.py holds them byte-identical)."""
    header = (
        f'{{"code":{int(code)},"language":"{_LANG_NAME[language]}","version":{int(version)},'
        f'"opaque":{int(opaque)},"flag":{int(flag)},"extFields":{ext_json},"serializeTypeCurrentRPC":"JSON"}}'
    ).encode("ascii")
    length = 4 + len(header) + len(body)
    if length > limits.frame_bytes_max:
        raise LocalProtocolError(f"frame of {length} bytes exceeds the limit of {limits.frame_bytes_max}")
    return b"".join((_PREFIX.pack(length, len(header)), header, body))


def json_quote(text: str) -> str:
    """``text`` as a JSON string, as the JSON header writes extFields' keys and values."""
    return _quote(text)


def _ext_json(ext: dict[str, str]) -> str:
    """``_dumps(ext)`` for a dict of strings, without the encoder's Python-level wrappers (a third of
    a send response's header cost); anything else goes to ``_dumps``."""
    quote = _quote
    try:
        return "{" + ",".join([quote(key) + ":" + quote(value) for key, value in ext.items()]) + "}"
    except TypeError:
        return _dumps(ext)


def encode_send_response(
    request: RemotingCommand, msg_id: str, queue_id: int, queue_offset: int, transaction_id: str | None = None
) -> bytes:
    """``encode(make_response(request, SUCCESS, ext_fields=send_response_fields(msg_id, queue_id,
    queue_offset, transaction_id)))``, rendered straight into its frame (one per acknowledged send or
    half; tests/unit/test_remoting_frame.py holds them byte-identical), JSON or ROCKETMQ."""
    if request.serialize_type is not _JSON:  # ROCKETMQ
        return _binary_response(request, _send_response_ext(msg_id, queue_id, queue_offset, transaction_id))
    txn = "" if transaction_id is None else f',"transactionId":{_quote(transaction_id)}'
    header = (
        f'{{"code":0,"language":"JAVA","version":{int(request.version)},"opaque":{int(request.opaque)},'
        f'"flag":1,"extFields":{{"msgId":{_quote(msg_id)},"queueId":"{int(queue_id)}",'
        f'"queueOffset":"{int(queue_offset)}"{txn}}},"serializeTypeCurrentRPC":"JSON"}}'
    ).encode("ascii")
    return _PREFIX.pack(4 + len(header), len(header)) + header


def _send_response_ext(msg_id: str, queue_id: int, queue_offset: int, transaction_id: str | None) -> bytes:
    """A send answer's extFields as ``binary_ext`` writes them (msgId, queueId, queueOffset, then
    transactionId if given). Ids of ASCII under 128 characters (txmq's own ids, always) are rendered
    as one text whose length bytes are characters, encoded once; anything else pair by pair."""
    queue_text = str(queue_id)
    offset_text = str(queue_offset)
    if (
        msg_id.isascii()
        and len(msg_id) < 128
        and (transaction_id is None or (transaction_id.isascii() and len(transaction_id) < 128))
    ):
        # a pair: int16 key length, key, int32 value length (three zero bytes and one < 128), value
        txn = (
            ""
            if transaction_id is None
            else f"\x00\x0dtransactionId\x00\x00\x00{chr(len(transaction_id))}{transaction_id}"
        )
        return (
            f"\x00\x05msgId\x00\x00\x00{chr(len(msg_id))}{msg_id}"
            f"\x00\x07queueId\x00\x00\x00{chr(len(queue_text))}{queue_text}"
            f"\x00\x0bqueueOffset\x00\x00\x00{chr(len(offset_text))}{offset_text}{txn}"
        ).encode("ascii")
    ext = binary_pair("msgId", msg_id) + binary_pair("queueId", queue_text)
    ext += binary_pair("queueOffset", offset_text)
    if transaction_id is not None:
        ext += binary_pair("transactionId", transaction_id)
    return ext


def encode_offset_answer(
    request: RemotingCommand, id_prefix: str, physical_offset: int, queue_id: int, queue_offset: int
) -> bytes | None:
    """``encode_send_response(request, id_prefix + send.hex16(physical_offset), queue_id,
    queue_offset)`` (a single send's answer, its msgId the offset message id) rendered by one C call
    (``_hdrmap.send_answer``) for a ROCKETMQ request; None when the module is not built
    (``TXMQ_PURE=1``), the request is JSON, or the C call declines: the caller then renders it so
    (tests/property/test_hdrmap_native.py holds the two byte-identical)."""
    if _SEND_ANSWER is None or request.serialize_type is _JSON:
        return None
    data: bytes | None = _SEND_ANSWER(
        request.version, request.opaque, id_prefix, physical_offset, queue_id, queue_offset
    )
    return data


def encode_success_response(request: RemotingCommand) -> bytes:
    """``encode(make_response(request, SUCCESS))`` (no remark, no fields, no body: the answer to an
    END_TRANSACTION), rendered straight into its frame (tests/unit/test_remoting_frame.py holds them
    byte-identical), JSON or ROCKETMQ."""
    if request.serialize_type is not _JSON:  # ROCKETMQ
        return _binary_response(request, b"")
    header = (
        f'{{"code":0,"language":"JAVA","version":{int(request.version)},"opaque":{int(request.opaque)},'
        '"flag":1,"extFields":{},"serializeTypeCurrentRPC":"JSON"}'
    ).encode("ascii")
    return _PREFIX.pack(4 + len(header), len(header)) + header


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ header; code and version must fit a signed 16-bit integer."""
    if not (-0x8000 <= cmd.code <= 0x7FFF and -0x8000 <= cmd.version <= 0x7FFF):
        raise LocalProtocolError(
            f"code {cmd.code} / version {cmd.version} do not fit the ROCKETMQ header's 16-bit fields"
        )
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    ext = binary_ext(cmd.ext_fields)
    return b"".join(
        (
            _BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag),
            _INT.pack(len(remark)),
            remark,
            _INT.pack(len(ext)),
            ext,
        )
    )


def binary_ext(ext: dict[str, str]) -> bytes:
    """extFields as the ROCKETMQ header writes them: ``(int16 kLen, k, int32 vLen, v)*``."""
    out = bytearray()
    for key, value in ext.items():
        raw_key = key.encode("utf-8")
        if len(raw_key) > 0x7FFF:
            raise LocalProtocolError(f"extFields key of {len(raw_key)} bytes does not fit 16 bits")
        raw_value = value.encode("utf-8")
        out += len(raw_key).to_bytes(2, "big")
        out += raw_key
        out += len(raw_value).to_bytes(4, "big")
        out += raw_value
    return bytes(out)


def encode_binary_request(
    code: int, language: LanguageCode, version: int, opaque: int, flag: int, ext: bytes, body: bytes
) -> bytes:
    """``encode`` of a ROCKETMQ request without remark whose extFields are already rendered as
    ``ext`` (``binary_ext``): one C call (``_hdrmap.binary_request``: the frame in one allocation, no
    struct pack and join) when the module is built and the values fit, else
    :func:`encode_binary_request_py`, the reference (tests/property/test_hdrmap_native.py holds them
    byte-identical), which also raises what a value that does not fit means."""
    if _BINARY_REQUEST is not None:
        data: bytes | None = _BINARY_REQUEST(
            code, language, version, opaque, flag, ext, body, limits.frame_bytes_max
        )
        if data is not None:
            return data
    return encode_binary_request_py(code, language, version, opaque, flag, ext, body)


def encode_binary_request_py(
    code: int, language: LanguageCode, version: int, opaque: int, flag: int, ext: bytes, body: bytes
) -> bytes:
    """``encode_binary_request`` in Python: one pack of the prefix and the fixed header."""
    if not (-0x8000 <= code <= 0x7FFF and -0x8000 <= version <= 0x7FFF):
        raise LocalProtocolError(
            f"code {code} / version {version} do not fit the ROCKETMQ header's 16-bit fields"
        )
    header_length = _BIN_FIXED_BYTES + 8 + len(ext)
    length = 4 + header_length + len(body)
    if length > limits.frame_bytes_max:
        raise LocalProtocolError(f"frame of {length} bytes exceeds the limit of {limits.frame_bytes_max}")
    head = _BIN_HEAD.pack(
        length, _BIN_WORD | header_length, code, language, version, opaque, flag, 0, len(ext)
    )
    return b"".join((head, ext, body))


def _binary_response(request: RemotingCommand, ext: bytes) -> bytes:
    """The SUCCESS response (JAVA, no remark, no body) to a ROCKETMQ ``request`` with extFields ``ext``;
    a version that does not fit 16 bits goes to ``encode`` (which raises as it always did)."""
    version = request.version
    if not -0x8000 <= version <= 0x7FFF:
        return encode(make_response(request, 0, ext_fields=_binary_map(ext, 0)))
    header_length = _BIN_FIXED_BYTES + 8 + len(ext)
    head = _BIN_HEAD.pack(
        4 + header_length, _BIN_WORD | header_length, 0, 0, version, request.opaque, 1, 0, len(ext)
    )
    return head + ext


# ---------------------------------------------------------------------------------------------- decoding


def frame_bounds(buf: bytes | bytearray, pos: int = 0) -> tuple[int, int] | None:
    """``(header_length, frame_end)`` of the frame starting at ``pos``, or None if the prefix is incomplete.

    Validates the prefix, so a bad length is reported before its frame is buffered.
    """
    if len(buf) - pos < PREFIX_BYTES:
        if len(buf) - pos >= 4:
            _check_length(_INT.unpack_from(buf, pos)[0])
        return None
    length, word = _PREFIX.unpack_from(buf, pos)
    _check_length(length)
    header_length = word & 0xFFFFFF
    if header_length > length - 4:
        raise RemoteProtocolError(f"header length {header_length} exceeds frame length {length}")
    if (word >> 24) not in _SERIALIZE_TYPES:
        raise RemoteProtocolError(f"unknown serialize type {word >> 24}")
    return header_length, pos + 4 + length


def _check_length(length: int) -> None:
    if length < 4:
        raise RemoteProtocolError(f"frame length {length} is below the minimum of 4")
    if length > limits.frame_bytes_max:
        raise RemoteProtocolError(f"frame length {length} exceeds the limit of {limits.frame_bytes_max}")


def decode_frame(buf: bytes | bytearray, pos: int = 0) -> tuple[RemotingCommand, int] | None:
    """Decode the frame at ``buf[pos:]``: ``(command, end)`` or None when more bytes are needed.

    Bytes after ``end`` are not looked at (they belong to the next frame).
    """
    if type(buf) is bytes:  # a read the connection holds as it came
        if _BINARY_FRAME is not None:  # a whole ROCKETMQ frame in one C call (else the reference's answer)
            made: tuple[RemotingCommand, int] | None = _BINARY_FRAME(
                buf, pos, limits.frame_bytes_max, _LANG_BY_CODE, _OTHER, _ROCKETMQ
            )
            if made is not None:
                return made
        return _decode_frame_bytes(buf, pos)
    if len(buf) - pos < PREFIX_BYTES:
        frame_bounds(buf, pos)  # checks a complete length word
        return None
    length, word = _PREFIX.unpack_from(buf, pos)
    header_length = word & 0xFFFFFF
    serialize_type = word >> 24
    end = pos + 4 + length
    # the checks of frame_bounds, inline: this runs once per request
    if not 4 <= length <= limits.frame_bytes_max or header_length > length - 4 or serialize_type > 1:
        frame_bounds(buf, pos)  # raises the precise error
    if len(buf) < end:
        return None
    header_start = pos + PREFIX_BYTES
    body_start = header_start + header_length
    with memoryview(buf) as view:  # one copy of the body, none of the header
        if serialize_type == 0:  # SerializeType.JSON
            return _decode_json(view[header_start:body_start], bytes(view[body_start:end])), end
        return _decode_binary(bytes(view[header_start:body_start]), bytes(view[body_start:end])), end


def _decode_frame_bytes(buf: bytes, pos: int) -> tuple[RemotingCommand, int] | None:
    """``decode_frame`` of ``bytes`` (immutable): the prefix read as integers (compiled: a C read per
    byte, no struct call and tuple), header and body sliced straight out (one copy each, no view)."""
    if len(buf) - pos < PREFIX_BYTES:
        frame_bounds(buf, pos)  # checks a complete length word
        return None
    length = _int32(buf, pos)
    serialize_type = buf[pos + 4]
    header_length = (buf[pos + 5] << 16) | (buf[pos + 6] << 8) | buf[pos + 7]
    end = pos + 4 + length
    if not 4 <= length <= limits.frame_bytes_max or header_length > length - 4 or serialize_type > 1:
        frame_bounds(buf, pos)  # raises the precise error
    if len(buf) < end:
        return None
    header_start = pos + PREFIX_BYTES
    body_start = header_start + header_length
    if serialize_type == 0:  # SerializeType.JSON
        return _decode_json(buf[header_start:body_start], buf[body_start:end]), end
    return _decode_binary(buf[header_start:body_start], buf[body_start:end]), end


def decode(frame: bytes | bytearray) -> RemotingCommand:
    """Decode exactly one complete frame (no bytes missing, none left over)."""
    result = decode_frame(frame)
    if result is None:
        raise RemoteProtocolError(f"incomplete frame ({len(frame)} bytes)")
    cmd, end = result
    if end != len(frame):
        raise RemoteProtocolError(f"{len(frame) - end} bytes after the end of the frame")
    return cmd


def _decode_json(header: bytes | memoryview, body: bytes) -> RemotingCommand:
    fields = _parse_json_object(header)
    # fields.get, not a bound get: compiled, each is a C call on the dict (no method object per call)
    code, opaque = fields.get("code", 0), fields.get("opaque", 0)
    flag, version = fields.get("flag", 0), fields.get("version", 0)
    if not (type(code) is int and type(opaque) is int and type(flag) is int and type(version) is int):
        code, opaque, flag, version = (_json_int(fields, n) for n in ("code", "opaque", "flag", "version"))
    remark = fields.get("remark")
    if remark is not None and type(remark) is not str:
        raise RemoteProtocolError("remark is not a string")
    language = fields.get("language")
    language = _LANG_BY_NAME.get(language, _OTHER) if type(language) is str else _json_language(language)
    # positional, in field order: code, opaque, flag, remark, ext_fields, body, language, version, type
    return new_command(
        code,
        opaque,
        flag,
        remark,
        _json_ext_fields(fields.get("extFields")),
        body,
        language,
        version,
        _JSON,
    )


def _parse_json_object(header: bytes | bytearray | memoryview) -> dict[str, Any]:
    """The header object; calls the C scanner directly, falling back to the full decoder."""
    try:
        text = str(header, "utf-8")
        try:
            fields, end = _scan_once(text, 0)
        except StopIteration:  # e.g. leading whitespace: let the full decoder judge
            fields, end = _loads(text), len(text)
        if end != len(text) and not text[end:].isspace():
            raise RemoteProtocolError("extra data after the JSON header")
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"invalid JSON header: {exc}") from None
    if type(fields) is not dict:
        raise RemoteProtocolError("the JSON header is not an object")
    return fields


def _json_int(fields: dict[str, Any], name: str) -> int:
    value = fields.get(name, 0)
    if type(value) is int:
        return value
    if value is None:
        return 0
    if type(value) is str and value.lstrip("-").isdecimal() and value.isascii():
        return int(value)
    raise RemoteProtocolError(f"header field {name!r} is not an integer: {value!r:.64}")


def _json_language(value: object) -> LanguageCode:
    if type(value) is str:
        return _LANG_BY_NAME.get(value, LanguageCode.OTHER)
    if type(value) is int:
        return _LANG_BY_CODE.get(value, LanguageCode.OTHER)
    return LanguageCode.JAVA if value is None else LanguageCode.OTHER


def _json_ext_fields(ext: object) -> dict[str, str]:
    """extFields as str -> str; numbers and booleans (ali-ons) become their Java string forms."""
    if ext is None:
        return {}
    if type(ext) is not dict:
        raise RemoteProtocolError("extFields is not an object")
    for value in ext.values():
        if type(value) is not str:
            break
    else:
        return ext
    coerced: dict[str, str] = {}
    for key, value in ext.items():
        if type(value) is str:
            coerced[key] = value
        elif value is True or value is False:
            coerced[key] = "true" if value else "false"
        elif type(value) is int or type(value) is float:
            coerced[key] = str(value)
        elif value is not None:
            raise RemoteProtocolError(f"extFields[{key!r}] is neither a string, a number nor a boolean")
    return coerced


def _decode_binary(header: bytes, body: bytes) -> RemotingCommand:
    """The ROCKETMQ header, read byte by byte: compiled, each index is a C read and each length a few
    integer operations (a struct call per field costs more than the whole field's text)."""
    size = len(header)
    if size < _BIN_FIXED_BYTES + 8:
        raise RemoteProtocolError(f"ROCKETMQ header of {size} bytes is too short")
    code = _int16(header, 0)
    language = header[2]
    version = _int16(header, 3)
    opaque = _int32(header, 5)
    flag = _int32(header, 9)
    remark_size = _int32(header, 13)
    pos = _BIN_FIXED_BYTES + 4
    if remark_size < 0 or pos + remark_size > size:
        raise RemoteProtocolError(f"ROCKETMQ header remark length {remark_size} is out of bounds")
    remark_start = pos
    pos += remark_size
    if pos + 4 > size:
        raise RemoteProtocolError("ROCKETMQ header truncated before the extFields length")
    ext_size = _int32(header, pos)
    pos += 4
    if ext_size < 0 or pos + ext_size > size:
        raise RemoteProtocolError(f"ROCKETMQ header extFields length {ext_size} is out of bounds")
    if pos + ext_size != size:
        raise RemoteProtocolError(f"{size - pos - ext_size} stray bytes after the ROCKETMQ header")
    try:
        remark = header[remark_start : pos - 4].decode("utf-8") if remark_size else None
        ext_fields = _binary_map(header, pos)
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"ROCKETMQ header text is not UTF-8: {exc}") from None
    # positional, in field order: code, opaque, flag, remark, ext_fields, body, language, version, type
    return new_command(
        code,
        opaque,
        flag,
        remark,
        ext_fields,
        body,
        _LANG_BY_CODE.get(language - 256 if language > 127 else language, _OTHER),
        version,
        _ROCKETMQ,
    )


def _int16(data: bytes, pos: int) -> int:
    """The signed big-endian 16-bit integer at ``pos`` (in bounds)."""
    value = (data[pos] << 8) | data[pos + 1]
    return value - 0x10000 if value > 0x7FFF else value


def _int32(data: bytes, pos: int) -> int:
    """The signed big-endian 32-bit integer at ``pos`` (in bounds)."""
    value = (data[pos] << 24) | (data[pos + 1] << 16) | (data[pos + 2] << 8) | data[pos + 3]
    return value - 0x100000000 if value > 0x7FFFFFFF else value


def _hdrmap_function(name: str) -> Any:
    """A function of the C extension ``protocol/remoting/_hdrmap.c`` (built beside the mypyc modules), or
    None: not built, or ``TXMQ_PURE=1``. Each has a Python reference that it is held to and that runs
    without it."""
    try:
        return getattr(importlib.import_module("txmq.protocol.remoting._hdrmap"), name)
    except (ImportError, AttributeError):
        return None


# the extFields pairs' reader (else :func:`_binary_map_py`), a single send's answer (else
# :func:`encode_send_response`) and a ROCKETMQ request frame (else :func:`encode_binary_request_py`)
_HDRMAP: Final[Any] = _hdrmap_function("binary_map")
_SEND_ANSWER: Final[Any] = _hdrmap_function("send_answer")
_BINARY_REQUEST: Final[Any] = _hdrmap_function("binary_request")
# a whole ROCKETMQ frame of a bytes read (else :func:`_decode_frame_bytes`, the reference:
# tests/property/test_binary_frame_native.py)
_BINARY_FRAME: Final[Any] = _hdrmap_function("binary_frame")


def _binary_map(data: bytes, pos: int) -> dict[str, str]:
    """The extFields pairs from ``pos`` to the end of ``data`` (see :func:`_binary_map_py`): one C
    call when the module is built; it answers None for anything wrong (a length out of bounds, text
    that is not UTF-8) and the reference then raises its error."""
    if _HDRMAP is not None:
        result: dict[str, str] | None = _HDRMAP(data, pos)
        if result is not None:
            return result
    return _binary_map_py(data, pos)


def _binary_map_py(data: bytes, pos: int) -> dict[str, str]:
    """The extFields pairs from ``pos`` to the end of ``data``: ``(int16 kLen, k, int32 vLen, v)*``.

    When the pairs' bytes are all ASCII (a send's, while no length reaches 128) they are decoded once
    and each key and value is a slice of that text (no bytes slice and decode per string); otherwise
    each is decoded from its bytes (UTF-8), the value before the key (the first error as always)."""
    result: dict[str, str] = {}
    end = len(data)
    pairs = data[pos:]
    text = pairs.decode("ascii") if pairs.isascii() else None
    base = pos  # text[i - base] is data[i]
    while pos < end:
        if pos + 2 > end:
            raise RemoteProtocolError("ROCKETMQ header truncated before the extFields key length")
        key_size = _int16(data, pos)
        pos += 2
        if key_size < 0 or pos + key_size > end:
            raise RemoteProtocolError(f"ROCKETMQ header extFields key length {key_size} is out of bounds")
        key_start = pos
        pos += key_size
        if pos + 4 > end:
            raise RemoteProtocolError("ROCKETMQ header truncated before the extFields value length")
        value_size = _int32(data, pos)
        pos += 4
        if value_size < 0 or pos + value_size > end:
            raise RemoteProtocolError(f"ROCKETMQ header extFields value length {value_size} is out of bounds")
        if text is not None:
            at = key_start - base
            result[text[at : at + key_size]] = text[pos - base : pos - base + value_size]
        else:
            value = data[pos : pos + value_size].decode("utf-8")
            result[data[key_start : key_start + key_size].decode("utf-8")] = value
        pos += value_size
    return result


def binary_pair(key: str, value: str) -> bytes:
    """One extFields pair as ``binary_ext`` writes it (for headers rendered in parts; ``TypeError``
    for a key or value that is not ``str``, compiled or not)."""
    if type(key) is not str or type(value) is not str:
        raise TypeError(f"extFields pair of {type(key).__name__} and {type(value).__name__}, not str")
    raw_key = key.encode("utf-8")
    if len(raw_key) > 0x7FFF:
        raise LocalProtocolError(f"extFields key of {len(raw_key)} bytes does not fit 16 bits")
    raw_value = value.encode("utf-8")
    return b"".join((len(raw_key).to_bytes(2, "big"), raw_key, len(raw_value).to_bytes(4, "big"), raw_value))
