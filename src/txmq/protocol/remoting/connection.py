"""``RemotingConnection``: the sans-IO state machine for one remoting TCP connection.

Three verbs and no I/O, as in h11: ``receive_data(bytes)`` buffers what the socket delivered
(``b""`` means EOF), ``next_event()`` returns the next event or ``NEED_DATA``, ``send(command)``
returns the bytes to write. The same class serves both ends, because both ends send requests: the
client sends SEND_MESSAGE, the broker sends CHECK_TRANSACTION_STATE back on the same connection.

Events from ``next_event()``:

* ``RemotingCommand``: a request from the peer (answer it unless ``is_oneway``).
* ``Response(command, request_code)``: the answer to one of our pending requests.
* ``UnmatchedResponse(command)``: a response whose opaque we are not waiting for (a late answer to a
  request the driver gave up on, or a confused peer). Reported, never fatal.
* ``ConnectionClosed(unanswered)``: the peer closed the connection; ``unanswered`` lists the opaques
  of requests that will never get a response.
* ``NEED_DATA``: feed more bytes.

Malformed input raises ``RemoteProtocolError`` and moves the connection to ``ERROR``; from then on
every call raises ``LocalProtocolError``. Any other exception is a bug.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from txmq.common import limits
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import RPC_ONEWAY, RPC_TYPE, LanguageCode, SerializeType
from txmq.protocol.remoting.command import DEFAULT_VERSION, RemotingCommand
from txmq.protocol.remoting.errors import LocalProtocolError, RemoteProtocolError

_OPAQUE_MAX: Final = 0x7FFFFFFF  # opaques are Java ints; we allocate 0..2^31-1 and wrap
_COMPACT_BYTES: Final = 1 << 20
_EMPTY: Final = b""
# the undecoded rest of a held read up to this size is joined with the next ``bytes`` read into one new
# ``bytes`` (decoded by ``frame``'s bytes path: slices, no views); a longer rest (a large frame arriving in
# pieces) goes into a ``bytearray`` that later reads are appended to (no copy of the rest per read)
_JOIN_REST_MAX: Final = 64 * 1024


class NeedData(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


class ConnectionState(enum.Enum):
    OPEN = "OPEN"
    CLOSED = "CLOSED"  # the peer sent EOF, or close() was called
    ERROR = "ERROR"  # a protocol error happened; the connection is unusable


@dataclass(frozen=True, slots=True)
class Response:
    """A response matched, by opaque, to a request this side sent."""

    command: RemotingCommand
    request_code: int


@dataclass(frozen=True, slots=True)
class UnmatchedResponse:
    """A response whose opaque matches no pending request."""

    command: RemotingCommand


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed the connection; ``unanswered`` holds the opaques still pending at that moment."""

    unanswered: tuple[int, ...] = ()


Event = RemotingCommand | Response | UnmatchedResponse | ConnectionClosed | NeedData


class RemotingConnection:
    """One connection's framing, request ids and pending-request table. Not thread-safe."""

    def __init__(
        self,
        *,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = DEFAULT_VERSION,
        serialize_type: SerializeType = SerializeType.JSON,
        first_opaque: int = 0,
        max_buffer_bytes: int = 2 * (limits.frame_bytes_max + frame.PREFIX_BYTES),
        max_pending: int = 1 << 16,
    ) -> None:
        self.language = language
        self.version = version
        self.serialize_type = serialize_type
        self.max_buffer_bytes = max_buffer_bytes
        self.max_pending = max_pending
        self._state = ConnectionState.OPEN
        # the received bytes not yet decoded start at _pos: a buffer of ours, or a whole read held as it
        # came (``bytes``, immutable) while nothing else is buffered
        self._buf: bytes | bytearray = bytearray()
        self._pos = 0
        self._eof = False
        self._next_opaque = first_opaque & _OPAQUE_MAX
        self._pending: dict[int, int] = {}

    # ------------------------------------------------------------------------------------------ state

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def pending(self) -> dict[int, int]:
        """A copy of the pending table: opaque -> request code."""
        return dict(self._pending)

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf) - self._pos

    def forget(self, opaque: int) -> int | None:
        """Stop waiting for ``opaque`` (the driver timed out); returns its request code, if pending."""
        return self._pending.pop(opaque, None)

    def close(self) -> tuple[int, ...]:
        """Close locally; returns the opaques that will never be answered."""
        self._check_usable()
        self._state = ConnectionState.CLOSED
        unanswered = tuple(self._pending)
        self._pending.clear()
        return unanswered

    def _check_usable(self) -> None:
        if self._state is ConnectionState.ERROR:
            raise LocalProtocolError("the connection already failed with a protocol error")

    # ------------------------------------------------------------------------------------------ sending

    def new_request(
        self,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        remark: str | None = None,
    ) -> RemotingCommand:
        """A request with a fresh opaque (skipping any still pending); pass it to ``send``."""
        opaque = self._fresh_opaque()
        return RemotingCommand(
            code=int(code),
            opaque=opaque,
            flag=RPC_ONEWAY if oneway else 0,
            remark=remark,
            ext_fields={} if ext_fields is None else ext_fields,
            body=body,
            language=self.language,
            version=self.version,
            serialize_type=self.serialize_type,
        )

    def send_json_request(self, code: int, ext_json: str, body: bytes) -> tuple[int, bytes]:
        """``new_request(code, ext, body)`` and ``send`` of it, for a JSON connection, with the
        extFields already rendered (``ext_json``): ``(opaque, bytes)``; the request is pending."""
        opaque = self._rendered_request_opaque(SerializeType.JSON)
        data = frame.encode_json_request(code, self.language, self.version, opaque, 0, ext_json, body)
        self._pending[opaque] = code
        return opaque, data

    def send_json_oneway(self, code: int, ext_json: str) -> bytes:
        """``send(new_request(code, ext, oneway=True))`` for a JSON connection, with the extFields
        already rendered (``ext_json``) and no body: the frame's bytes (nothing becomes pending)."""
        self._check_rendered_open(SerializeType.JSON)
        opaque = self._fresh_opaque()
        return frame.encode_json_request(code, self.language, self.version, opaque, RPC_ONEWAY, ext_json, b"")

    def send_binary_request(self, code: int, ext: bytes, body: bytes) -> tuple[int, bytes]:
        """``send_json_request`` for a ROCKETMQ connection: the extFields already rendered as
        ``frame.binary_ext`` writes them (``ext``); ``(opaque, bytes)``, the request is pending."""
        opaque = self._rendered_request_opaque(SerializeType.ROCKETMQ)
        data = frame.encode_binary_request(code, self.language, self.version, opaque, 0, ext, body)
        self._pending[opaque] = code
        return opaque, data

    def send_binary_oneway(self, code: int, ext: bytes) -> bytes:
        """``send_json_oneway`` for a ROCKETMQ connection (``ext`` as ``frame.binary_ext`` writes it)."""
        self._check_rendered_open(SerializeType.ROCKETMQ)
        opaque = self._fresh_opaque()
        return frame.encode_binary_request(code, self.language, self.version, opaque, RPC_ONEWAY, ext, b"")

    def _fresh_opaque(self) -> int:
        """The next opaque not pending (opaques wrap at 2^31 - 1)."""
        pending = self._pending
        opaque = self._next_opaque
        while opaque in pending:
            opaque = (opaque + 1) & _OPAQUE_MAX
        self._next_opaque = (opaque + 1) & _OPAQUE_MAX
        return opaque

    def _rendered_request_opaque(self, serialize_type: SerializeType) -> int:
        """The opaque for a two-way request with a pre-rendered ``serialize_type`` header (the caller
        makes it pending once its frame is encoded); raises when the connection is not open in that
        format or the pending limit is reached."""
        self._check_rendered_open(serialize_type)
        if len(self._pending) >= self.max_pending:
            raise LocalProtocolError(f"{len(self._pending)} requests pending, the limit")
        return self._fresh_opaque()

    def _check_rendered_open(self, serialize_type: SerializeType) -> None:
        """Raise unless this connection is open and writes ``serialize_type`` headers (the format of
        pre-rendered extFields)."""
        if self.serialize_type is not serialize_type:
            raise LocalProtocolError(
                f"a pre-rendered {serialize_type.name} header needs a {serialize_type.name} connection"
            )
        if self._state is not ConnectionState.OPEN:
            self._check_usable()  # raises in ERROR
            raise LocalProtocolError("cannot send on a closed connection")

    def _admit(self, cmd: RemotingCommand) -> bool:
        """Refuse ``cmd`` on a connection that is not open or, for a two-way request, whose opaque is
        pending or whose pending requests are at the limit; True for a two-way request (the caller
        makes it pending once its bytes are made)."""
        if self._state is not ConnectionState.OPEN:
            self._check_usable()  # raises in ERROR
            raise LocalProtocolError("cannot send on a closed connection")
        if cmd.flag & (RPC_TYPE | RPC_ONEWAY):
            return False
        if cmd.opaque in self._pending:
            raise LocalProtocolError(f"opaque {cmd.opaque} is already pending")
        if len(self._pending) >= self.max_pending:
            raise LocalProtocolError(f"{len(self._pending)} requests pending, the limit")
        return True

    def send(self, cmd: RemotingCommand) -> bytes:
        """The bytes for ``cmd``; a two-way request becomes pending until its response arrives."""
        two_way = self._admit(cmd)
        data = frame.encode(cmd)
        if two_way:
            self._pending[cmd.opaque] = cmd.code
        return data

    def send_parts(self, cmd: RemotingCommand) -> tuple[bytes, bytes]:
        """``send(cmd)`` as the frame's head and body, not joined (``frame.encode_parts``): the caller
        writes both, in this order. The same checks, errors and pending bookkeeping as ``send``."""
        two_way = self._admit(cmd)
        parts = frame.encode_parts(cmd)
        if two_way:
            self._pending[cmd.opaque] = cmd.code
        return parts

    # ------------------------------------------------------------------------------------------ receiving

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes from the peer; ``b""`` records EOF. A ``bytes`` read arriving while nothing is
        buffered (pipelined requests: reads end at a frame's end) is held as it is, not copied, and
        frames are decoded from it; one arriving after the short undecoded rest of a held read (a read
        that ended inside a frame) is held joined to that rest, one new ``bytes``. Anything else
        (``data`` may be the driver's reused read buffer, or the rest is long) is copied into a
        ``bytearray`` of ours, with the rest of a held read before it."""
        self._check_usable()
        if self._eof or self._state is ConnectionState.CLOSED:
            if data:
                raise LocalProtocolError("data received after EOF or close")
            return
        if not data:
            self._eof = True
            return
        if len(self._buf) - self._pos + len(data) > self.max_buffer_bytes:
            self._state = ConnectionState.ERROR
            raise RemoteProtocolError(f"receive buffer exceeds {self.max_buffer_bytes} bytes")
        buf = self._buf
        if type(data) is bytes:
            rest = len(buf) - self._pos
            if rest <= 0:
                self._buf = data
                self._pos = 0
                return
            if rest <= _JOIN_REST_MAX and type(buf) is bytes:
                self._buf = buf[self._pos :] + data
                self._pos = 0
                return
        if type(buf) is not bytearray:  # the undecoded rest of a held read becomes our buffer's start
            self._buf = bytearray(buf[self._pos :])
            self._pos = 0
        self._buf += data

    def next_event(self) -> Event:
        """The next event; raises ``RemoteProtocolError`` on malformed input (the connection is dead)."""
        cmd = self._next_frame()
        return self._event(cmd) if isinstance(cmd, RemotingCommand) else cmd

    def next_command(self) -> RemotingCommand | Event:
        """``next_event`` without the ``Response`` wrapper, for a driver that only needs the answer: a
        response matched to a pending request comes as its ``RemotingCommand`` (its flag marks it a
        response; the request's code is not given), a request from the peer as itself; every other
        event as ``next_event`` gives it (``UnmatchedResponse``, ``NEED_DATA``, ``ConnectionClosed``)."""
        cmd = self._next_frame()
        if not isinstance(cmd, RemotingCommand):
            return cmd
        if cmd.flag & RPC_TYPE and self._pending.pop(cmd.opaque, None) is None:
            return UnmatchedResponse(cmd)
        return cmd

    def _next_frame(self) -> RemotingCommand | NeedData | ConnectionClosed:
        """The next whole frame's command, taken off the buffer, or what ``_no_frame`` says when no
        whole frame is buffered; malformed input puts the connection in ERROR and raises."""
        if self._state is ConnectionState.ERROR:
            self._check_usable()  # raises
        try:
            decoded = frame.decode_frame(self._buf, self._pos)
        except RemoteProtocolError:
            self._state = ConnectionState.ERROR
            raise
        if decoded is None:
            return self._no_frame()
        cmd, end = decoded
        self._consume(end)
        return cmd

    def _event(self, cmd: RemotingCommand) -> Event:
        if not cmd.flag & RPC_TYPE:
            return cmd
        code = self._pending.pop(cmd.opaque, None)
        if code is None:
            return UnmatchedResponse(cmd)
        return Response(cmd, code)

    # A driver may receive a large frame straight into a buffer of its own (one socket read into its
    # place, instead of reads appended to this buffer and the frame copied out of it): once
    # ``next_event`` says NEED_DATA, ``partial_frame_bytes`` gives the size of the frame begun,
    # ``take_partial_frame`` moves what is buffered of it into the frame's buffer, and the complete
    # frame goes to ``receive_frame``.

    def partial_frame_bytes(self) -> int:
        """The whole size (prefix included) of the incomplete frame at the head of the buffer, or 0
        when fewer than its prefix's bytes are buffered (or nothing, or the connection is not open)."""
        if self._state is not ConnectionState.OPEN or self._eof:
            return 0
        try:
            bounds = frame.frame_bounds(self._buf, self._pos)
        except RemoteProtocolError:
            self._state = ConnectionState.ERROR
            raise
        if bounds is None or bounds[1] <= len(self._buf):
            return 0
        return bounds[1] - self._pos

    def take_partial_frame(self, into: bytearray) -> int:
        """Move the buffered start of the incomplete frame (everything buffered) to the start of
        ``into``, the frame's own buffer (at least ``partial_frame_bytes`` long); returns the bytes moved."""
        size = len(self._buf) - self._pos
        if size > len(into):
            raise LocalProtocolError(f"{size} bytes buffered, more than the frame's {len(into)}")
        with memoryview(self._buf) as view:
            into[:size] = view[self._pos :]
        self._buf = bytearray()
        self._pos = 0
        return size

    def receive_frame(self, data: bytearray, size: int) -> Event:
        """The event of one complete frame received into its own buffer: ``data[:size]`` holds exactly
        that frame (the buffer may be longer, reused), and nothing was buffered before it
        (``take_partial_frame`` emptied the buffer). Nothing of ``data`` is kept: it may be reused."""
        self._check_usable()
        if self._state is not ConnectionState.OPEN or self._pos < len(self._buf):
            raise LocalProtocolError("a whole frame received out of order")
        try:
            decoded = frame.decode_frame(data, 0)
            if decoded is None or decoded[1] != size:
                raise RemoteProtocolError(f"{size} bytes received whole do not hold exactly one frame")
        except RemoteProtocolError:
            self._state = ConnectionState.ERROR
            raise
        return self._event(decoded[0])

    def _no_frame(self) -> NeedData | ConnectionClosed:
        if not self._eof and self._state is ConnectionState.OPEN:
            return NEED_DATA
        if self._pos < len(self._buf):
            self._state = ConnectionState.ERROR
            raise RemoteProtocolError(f"connection closed inside a frame ({self.buffered_bytes} bytes)")
        self._state = ConnectionState.CLOSED
        unanswered = tuple(self._pending)
        self._pending.clear()
        return ConnectionClosed(unanswered)

    def _consume(self, end: int) -> None:
        buf = self._buf
        if end == len(buf):
            self._buf = _EMPTY  # a held read is let go; the next one is held or copied afresh
            self._pos = 0
        elif end > _COMPACT_BYTES and isinstance(buf, bytearray):
            del buf[:end]
            self._pos = 0
        else:  # a held read is never compacted: it is let go once decoded, or copied by receive_data
            self._pos = end
