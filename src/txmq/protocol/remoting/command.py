"""``RemotingCommand``: one remoting frame as a value.

A command is a request when its ``flag`` lacks ``RPC_TYPE`` and a response when it has it; responses
reuse the request's ``opaque`` (the request id) and serialize type. ``code`` is a plain ``int`` (a
``RequestCode`` on requests, a ``ResponseCode`` on responses) so unknown codes pass through intact.
``ext_fields`` maps strings to strings: the frame decoder coerces the numbers and booleans some
clients (ali-ons) put there.

The dataclass is frozen but ``ext_fields`` is a plain dict for speed: treat it as read-only.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from typing import Any, Final

from txmq.common.fastinit import slot_init
from txmq.protocol.remoting.codes import RPC_ONEWAY, RPC_TYPE, LanguageCode, SerializeType

DEFAULT_VERSION: Final = 0
"""The ``version`` txmq puts on commands it originates; peers do not depend on it for 4.x codes."""


@slot_init  # two are built per request (the request and its response)
@dataclass(frozen=True, slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: LanguageCode = LanguageCode.JAVA
    version: int = DEFAULT_VERSION
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)


# the slots' descriptors: a command built from compiled code (``new_command``) stores its fields
# through them directly, instead of calling the class (an interpreted ``__init__``, ~9k instructions)
_FIELDS: Final = RemotingCommand.__dict__
_new_object: Final = object.__new__
_set_code: Final = _FIELDS["code"].__set__
_set_opaque: Final = _FIELDS["opaque"].__set__
_set_flag: Final = _FIELDS["flag"].__set__
_set_remark: Final = _FIELDS["remark"].__set__
_set_ext_fields: Final = _FIELDS["ext_fields"].__set__
_set_body: Final = _FIELDS["body"].__set__
_set_language: Final = _FIELDS["language"].__set__
_set_version: Final = _FIELDS["version"].__set__
_set_serialize_type: Final = _FIELDS["serialize_type"].__set__
if [f.name for f in fields(RemotingCommand)] != [
    "code", "opaque", "flag", "remark", "ext_fields", "body", "language", "version", "serialize_type",
]:  # fmt: skip
    raise AssertionError("RemotingCommand's fields changed: update new_command's setters")


def _load_command() -> Any:
    """The C maker of commands (``protocol/remoting/_hdrmap.c``'s ``command``, bound here to the
    class's slots) or None: not built, or ``TXMQ_PURE=1``; :func:`new_command_py` is its reference."""
    try:
        module = importlib.import_module("txmq.protocol.remoting._hdrmap")
    except ImportError:
        return None
    module.bind_command(RemotingCommand, tuple(_FIELDS[f.name] for f in fields(RemotingCommand)))
    return module.command


_C_COMMAND: Final[Any] = _load_command()


def new_command(
    code: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
    body: bytes,
    language: LanguageCode,
    version: int,
    serialize_type: SerializeType,
) -> RemotingCommand:
    """``RemotingCommand(code, opaque, ...)`` with every field given (the frame decoder builds one per
    frame): one C call when the extension is built (the object allocated and its nine slots stored,
    ~0.5k instructions where nine descriptor calls cost ~6k), else :func:`new_command_py`."""
    if _C_COMMAND is not None:
        made: RemotingCommand = _C_COMMAND(
            code, opaque, flag, remark, ext_fields, body, language, version, serialize_type
        )
        return made
    return new_command_py(code, opaque, flag, remark, ext_fields, body, language, version, serialize_type)


def new_command_py(
    code: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
    body: bytes,
    language: LanguageCode,
    version: int,
    serialize_type: SerializeType,
) -> RemotingCommand:
    """:func:`new_command` in Python: the same value as ``RemotingCommand(code, opaque, ...)``, its
    fields stored through their slot descriptors from compiled code."""
    cmd: RemotingCommand = _new_object(RemotingCommand)
    _set_code(cmd, code)
    _set_opaque(cmd, opaque)
    _set_flag(cmd, flag)
    _set_remark(cmd, remark)
    _set_ext_fields(cmd, ext_fields)
    _set_body(cmd, body)
    _set_language(cmd, language)
    _set_version(cmd, version)
    _set_serialize_type(cmd, serialize_type)
    return cmd


def make_request(
    code: int,
    opaque: int,
    ext_fields: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    oneway: bool = False,
    remark: str | None = None,
    language: LanguageCode = LanguageCode.JAVA,
    version: int = DEFAULT_VERSION,
    serialize_type: SerializeType = SerializeType.JSON,
) -> RemotingCommand:
    """A request; ``RemotingConnection.new_request`` is the usual way to get one with a fresh opaque."""
    return RemotingCommand(
        code=int(code),
        opaque=opaque,
        flag=RPC_ONEWAY if oneway else 0,
        remark=remark,
        ext_fields={} if ext_fields is None else ext_fields,
        body=body,
        language=language,
        version=version,
        serialize_type=serialize_type,
    )


def make_response(
    request: RemotingCommand,
    code: int = 0,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    """The response to ``request``: same opaque, version and serialize type, RPC_TYPE set.

    The language is ours (JAVA, as a Java broker answers), not the requester's.
    """
    # one response is built per request
    return new_command(
        int(code),
        request.opaque,
        RPC_TYPE,
        remark,
        {} if ext_fields is None else ext_fields,
        body,
        LanguageCode.JAVA,
        request.version,
        request.serialize_type,
    )
