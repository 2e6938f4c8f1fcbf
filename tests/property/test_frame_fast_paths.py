"""The broker's per-send frame work (sendcpu.md) equals the general way it replaced:

* a read held as ``bytes`` by the connection decodes exactly as the same bytes in a ``bytearray``
  buffer (the same command, or ``RemoteProtocolError`` with the same message), and a stream fed in
  arbitrary pieces of any buffer type gives the events of the whole stream;
* ``new_command`` builds the value ``RemotingCommand(...)`` builds (equal, same repr, frozen);
* a binary header whose pairs are ASCII (sliced from one decoded text) decodes as the struct-based
  reference reading (tests/property/test_remoting_binary.py), errors included;
* the send answer's extFields rendered as one text are ``binary_ext``'s bytes, for any ids, and its
  offset id's hex digits (``send.hex16``) are the format's.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.property.test_remoting_binary import _frame_of, _outcome, _reference
from txmq.broker.send import _HEX16, hex16
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import LanguageCode, RequestCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand, make_request, new_command
from txmq.protocol.remoting.connection import NEED_DATA, RemotingConnection
from txmq.protocol.remoting.errors import RemoteProtocolError

_texts = st.text(max_size=12)
_fields = st.tuples(
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | st.text(min_size=1, max_size=12),
    st.dictionaries(_texts, _texts, max_size=6),
    st.binary(max_size=40),
    st.sampled_from(list(LanguageCode)),
    st.integers(-(2**15), 2**15 - 1),
    st.sampled_from(list(SerializeType)),
)


@given(_fields)
def test_new_command_is_the_class_call(fields: tuple[object, ...]) -> None:
    built = new_command(*fields)  # type: ignore[arg-type]
    expected = RemotingCommand(*fields)  # type: ignore[arg-type]
    assert type(built) is RemotingCommand
    assert built == expected
    assert repr(built) == repr(expected)
    assert dataclasses.astuple(built) == dataclasses.astuple(expected)
    for value in (built, expected):  # its dict field makes the value unhashable, either way
        with pytest.raises(TypeError):
            hash(value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.code = 1  # type: ignore[misc]


def _decoded(buf: bytes | bytearray, pos: int) -> object:
    try:
        return frame.decode_frame(buf, pos)
    except RemoteProtocolError as exc:
        return ("error", str(exc))


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
    serialize_type=st.sampled_from(list(SerializeType)),
)
_junk = st.binary(max_size=40)


@given(st.lists(_commands, max_size=3), _junk, st.integers(0, 8))
def test_a_held_read_decodes_as_a_buffer(commands: list[RemotingCommand], junk: bytes, lead: int) -> None:
    data = b"\x00" * lead + b"".join(frame.encode(c) for c in commands) + junk
    pos = lead
    while True:
        held, buffered = _decoded(data, pos), _decoded(bytearray(data), pos)
        assert held == buffered
        if not isinstance(held, tuple) or held[0] == "error":
            break
        pos = held[1]


@given(st.binary(max_size=64))
def test_any_bytes_decode_held_as_buffered(data: bytes) -> None:
    for pos in range(min(len(data), 4) + 1):
        assert _decoded(data, pos) == _decoded(bytearray(data), pos)


# binary headers whose pairs are ASCII (the one-text path), lengths near the real shape and lying
_ascii = st.binary(max_size=10).map(lambda b: bytes(c & 0x7F for c in b))
_piece = st.tuples(st.sampled_from([2, 4]), st.integers(-3, 12), _ascii).map(
    lambda t: (struct.pack(">h", t[1]) if t[0] == 2 else struct.pack(">i", t[1])) + t[2]
)
_fixed = st.binary(min_size=13, max_size=13)
_ascii_shaped = st.tuples(_fixed, st.integers(0, 8), st.lists(_piece, max_size=6)).map(
    lambda t: t[0] + struct.pack(">i", 0) + b"".join(t[2]) if t[1] else t[0] + b"".join(t[2])
)


@given(_ascii_shaped)
def test_ascii_pairs_decode_as_the_reference_reading(header: bytes) -> None:
    expected = _outcome(_reference, header)
    assert _outcome(frame._decode_binary, header) == expected
    assert _outcome(lambda h, _b: frame.decode(_frame_of(h)), header) == expected
    assert _outcome(lambda h, _b: frame.decode(bytearray(_frame_of(h))), header) == expected


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=150), max_size=6))
def test_any_pairs_round_trip(ext: dict[str, str]) -> None:
    cmd = RemotingCommand(1, 7, 0, None, ext, b"x", LanguageCode.JAVA, 0, SerializeType.ROCKETMQ)
    assert frame.decode(frame.encode(cmd)) == cmd
    assert frame.decode(bytearray(frame.encode(cmd))) == cmd


_ids = st.text(max_size=200) | st.text(st.characters(max_codepoint=127), min_size=100, max_size=200)


@given(_ids, st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1), st.none() | _ids)
def test_send_answer_pairs_are_binary_ext(msg_id: str, queue_id: int, offset: int, txn: str | None) -> None:
    fields = {"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(offset)}
    if txn is not None:
        fields["transactionId"] = txn
    assert frame._send_response_ext(msg_id, queue_id, offset, txn) == frame.binary_ext(fields)


_kinds = st.sampled_from([bytes, bytearray, memoryview])


@given(st.lists(_commands, min_size=1, max_size=4), st.data())
def test_a_stream_in_any_pieces_gives_the_whole_streams_events(
    commands: list[RemotingCommand], data: st.DataObject
) -> None:
    requests = [dataclasses.replace(c, flag=c.flag & ~1) for c in commands]  # requests, not responses
    stream = b"".join(frame.encode(c) for c in requests)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    conn = RemotingConnection()
    events = []
    start = 0
    for end in [*cuts, len(stream)]:
        piece = stream[start:end]
        start = end
        if not piece:
            continue
        kind = data.draw(_kinds)
        conn.receive_data(kind(piece) if kind is not bytes else piece)
        while (event := conn.next_event()) is not NEED_DATA:
            events.append(event)
    assert events == requests
    assert conn.buffered_bytes == 0


def test_a_held_read_is_not_copied_and_its_rest_joins_the_next_read() -> None:
    first = frame.encode(make_request(RequestCode.SEND_MESSAGE_V2, 1, {"a": "b"}, b"one"))
    second = frame.encode(make_request(RequestCode.SEND_MESSAGE_V2, 2, {"a": "c"}, b"two"))
    conn = RemotingConnection()
    read = first + second[:5]
    conn.receive_data(read)
    assert conn._buf is read  # held, no copy
    assert conn.next_event() == frame.decode(first)
    assert conn.next_event() is NEED_DATA
    assert conn.buffered_bytes == 5
    conn.receive_data(bytearray(second[5:]))
    assert conn.next_event() == frame.decode(second)
    assert conn.next_event() is NEED_DATA
    assert conn.buffered_bytes == 0
    whole = frame.encode(make_request(RequestCode.SEND_MESSAGE_V2, 3, {}, b"x" * 50))
    conn.receive_data(whole[:20])
    assert conn.partial_frame_bytes() == len(whole)
    into = bytearray(len(whole))
    assert conn.take_partial_frame(into) == 20
    into[20:] = whole[20:]
    assert conn.receive_frame(into, len(whole)) == frame.decode(whole)


@given(st.integers(0, 2**64 - 1))
def test_hex16_is_the_format(offset: int) -> None:
    """A single send's offset id: ``send.hex16`` writes the 16 hex digits ``"{:016X}"`` writes."""
    assert hex16(offset) == f"{offset:016X}" == _HEX16(offset)
