"""RemotingConnection: framing over a stream, opaque matching, oneway, EOF and error states."""

from __future__ import annotations

import struct

import pytest

from tests.unit.remoting_helpers import FRAMES, ConnectionPair, drain
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_request, make_response
from txmq.protocol.remoting.connection import (
    NEED_DATA,
    ConnectionClosed,
    ConnectionState,
    RemotingConnection,
    Response,
    UnmatchedResponse,
)
from txmq.protocol.remoting.errors import LocalProtocolError, RemoteProtocolError

ALL = b"".join(data for _, data in FRAMES)
REQUESTS = [cmd for cmd, _ in FRAMES if not cmd.is_response]


def _as_peer_events(cmds: list[RemotingCommand]) -> list[object]:
    # no pending requests on a fresh connection: responses arrive as UnmatchedResponse
    return [UnmatchedResponse(c) if c.is_response else c for c in cmds]


def test_stream_whole() -> None:
    conn = RemotingConnection()
    conn.receive_data(ALL)
    assert drain(conn) == _as_peer_events([c for c, _ in FRAMES])
    assert conn.buffered_bytes == 0


def test_stream_byte_by_byte_no_early_event() -> None:
    conn = RemotingConnection()
    events: list[object] = []
    ends = set()
    pos = 0
    for _, data in FRAMES:
        pos += len(data)
        ends.add(pos)
    for i in range(len(ALL)):
        conn.receive_data(ALL[i : i + 1])
        got = drain(conn)
        assert len(got) == (1 if i + 1 in ends else 0), i
        events += got
    assert events == _as_peer_events([c for c, _ in FRAMES])


def test_trailing_partial_frame_stays_buffered() -> None:
    conn = RemotingConnection()
    partial = FRAMES[0][1][:10]
    conn.receive_data(FRAMES[1][1] + partial)
    assert drain(conn) == [FRAMES[1][0]]
    assert conn.buffered_bytes == len(partial)
    conn.receive_data(FRAMES[0][1][10:])
    assert drain(conn) == [FRAMES[0][0]]


@pytest.mark.parametrize("cut", [1, 10, len(FRAMES[0][1]) - 1])
def test_a_read_after_a_short_rest_is_held_joined_as_bytes(cut: int) -> None:
    """A ``bytes`` read after a read that ended inside a frame is joined to that rest, one ``bytes``
    (its frames decoded by slicing, frame's bytes path), not copied into a ``bytearray``."""
    conn = RemotingConnection()
    first, second = FRAMES[1][1] + FRAMES[0][1][:cut], FRAMES[0][1][cut:] + FRAMES[2][1]
    conn.receive_data(first)
    assert drain(conn) == _as_peer_events([FRAMES[1][0]])
    conn.receive_data(second)
    assert type(conn._buf) is bytes and conn.buffered_bytes == len(FRAMES[0][1]) + len(FRAMES[2][1])
    assert drain(conn) == _as_peer_events([FRAMES[0][0], FRAMES[2][0]])
    assert conn.buffered_bytes == 0


def test_a_long_rest_goes_into_a_bytearray_read_after_read() -> None:
    """A rest over the join bound (a large frame arriving in pieces) is copied into a ``bytearray``
    that later reads are appended to (no copy of the whole rest per read); the frame decodes whole."""
    from txmq.protocol.remoting import connection

    big = frame.encode(make_request(RequestCode.SEND_MESSAGE_V2, 5, {"a": "b"}, body=b"z" * 300_000))
    conn = RemotingConnection()
    step = connection._JOIN_REST_MAX // 2
    kinds = []
    for pos in range(0, len(big), step):
        conn.receive_data(big[pos : pos + step])
        kinds.append(type(conn._buf))
        if pos + step < len(big):
            assert drain(conn) == []
    assert kinds[:3] == [bytes, bytes, bytes] and set(kinds[3:]) == {bytearray}  # rests of 0, 32, 64 KiB
    (event,) = drain(conn)
    assert isinstance(event, RemotingCommand) and event.body == b"z" * 300_000


def test_request_response_matched_by_opaque() -> None:
    pair = ConnectionPair()
    first = pair.client.new_request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, b"body")
    second = pair.client.new_request(RequestCode.HEART_BEAT, body=b"{}")
    assert first.opaque != second.opaque
    assert pair.send(pair.client, first) == [first]
    assert pair.send(pair.client, second) == [second]
    assert pair.client.pending == {first.opaque: 310, second.opaque: 34}
    # answered out of order
    answer2 = make_response(second, ResponseCode.SUCCESS)
    answer1 = make_response(first, ResponseCode.SUCCESS, ext_fields={"msgId": "X"})
    assert pair.send(pair.broker, answer2) == [Response(answer2, RequestCode.HEART_BEAT)]
    assert pair.send(pair.broker, answer1) == [Response(answer1, RequestCode.SEND_MESSAGE_V2)]
    assert pair.client.pending == {}


def test_next_command_gives_a_matched_answer_without_its_wrapper() -> None:
    """``next_command`` is ``next_event`` with a matched ``Response`` unwrapped to its command: the
    same commands in the same order, the pending entry taken; unmatched answers, requests from the
    peer, NEED_DATA and the close come as ``next_event`` gives them."""
    pair = ConnectionPair()
    first = pair.client.new_request(RequestCode.SEND_MESSAGE_V2, {"a": "g"}, b"body")
    second = pair.client.new_request(RequestCode.HEART_BEAT, body=b"{}")
    pair.client.send(first), pair.client.send(second)
    from_broker = pair.broker.new_request(RequestCode.CHECK_TRANSACTION_STATE, {"t": "1"})
    answers = [
        make_response(second, ResponseCode.SUCCESS),
        make_response(first, ResponseCode.SUCCESS, ext_fields={"msgId": "X"}),
        make_response(first, ResponseCode.SUCCESS),  # answered twice: the second is unmatched
        from_broker,
    ]
    pair.client.receive_data(b"".join(pair.broker.send(cmd) for cmd in answers))
    got = [pair.client.next_command() for _ in range(5)]
    assert got == [answers[0], answers[1], UnmatchedResponse(answers[2]), from_broker, NEED_DATA]
    assert pair.client.pending == {}
    pair.client.receive_data(b"")
    assert pair.client.next_command() == ConnectionClosed(())


def test_oneway_has_no_pending_entry() -> None:
    pair = ConnectionPair()
    end = pair.client.new_request(RequestCode.END_TRANSACTION, {"commitOrRollback": "8"}, oneway=True)
    assert end.is_oneway
    assert pair.send(pair.client, end) == [end]
    assert pair.client.pending == {}


def test_broker_initiated_request() -> None:
    pair = ConnectionPair()
    check = pair.broker.new_request(RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "M"}, b"rec", oneway=True)
    assert pair.send(pair.broker, check) == [check]
    # and a two-way broker request (e.g. GET_CONSUMER_RUNNING_INFO) is matched on the broker side
    ask = pair.broker.new_request(RequestCode.GET_CONSUMER_RUNNING_INFO)
    assert pair.send(pair.broker, ask) == [ask]
    reply = make_response(ask, 0, body=b"{}")
    assert pair.send(pair.client, reply) == [Response(reply, RequestCode.GET_CONSUMER_RUNNING_INFO)]


def test_unexpected_and_forgotten_responses_are_reported() -> None:
    pair = ConnectionPair()
    req = pair.client.new_request(RequestCode.PULL_MESSAGE)
    pair.send(pair.client, req)
    assert pair.client.forget(req.opaque) == RequestCode.PULL_MESSAGE
    late = make_response(req, ResponseCode.PULL_NOT_FOUND)
    assert pair.send(pair.broker, late) == [UnmatchedResponse(late)]
    stray = RemotingCommand(code=0, opaque=424242, flag=1)
    assert pair.send(pair.broker, stray) == [UnmatchedResponse(stray)]
    assert pair.client.state is ConnectionState.OPEN


def test_opaques_skip_pending_ones_and_wrap() -> None:
    conn = RemotingConnection(first_opaque=0x7FFFFFFE)
    a = conn.new_request(10)
    conn.send(a)
    b = conn.new_request(10)
    c = conn.new_request(10)
    assert (a.opaque, b.opaque, c.opaque) == (0x7FFFFFFE, 0x7FFFFFFF, 0)
    conn2 = RemotingConnection()
    conn2.send(make_request(10, 1))  # someone else took opaque 1
    assert [conn2.new_request(10).opaque for _ in range(3)] == [0, 2, 3]


def test_duplicate_pending_opaque_is_local_error() -> None:
    conn = RemotingConnection()
    conn.send(make_request(10, 5))
    with pytest.raises(LocalProtocolError):
        conn.send(make_request(11, 5))


def test_pending_limit() -> None:
    conn = RemotingConnection(max_pending=2)
    conn.send(conn.new_request(10))
    conn.send(conn.new_request(10))
    with pytest.raises(LocalProtocolError):
        conn.send(conn.new_request(10))
    conn.send(conn.new_request(10, oneway=True))  # oneway never counts


def test_eof_reports_unanswered_requests() -> None:
    conn = RemotingConnection()
    req = conn.new_request(RequestCode.SEND_MESSAGE)
    conn.send(req)
    conn.receive_data(FRAMES[0][1])
    conn.receive_data(b"")
    assert conn.next_event() == FRAMES[0][0]
    assert conn.next_event() == ConnectionClosed((req.opaque,))
    assert conn.next_event() == ConnectionClosed(())
    assert conn.state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError):
        conn.receive_data(b"more")
    with pytest.raises(LocalProtocolError):
        conn.send(conn.new_request(10))


def test_eof_inside_a_frame_is_remote_error() -> None:
    conn = RemotingConnection()
    conn.receive_data(FRAMES[0][1][:-1])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    assert conn.state is ConnectionState.ERROR


def test_protocol_error_poisons_the_connection() -> None:
    conn = RemotingConnection()
    conn.receive_data(struct.pack(">iI", 2, 0))
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    assert conn.state is ConnectionState.ERROR
    for call in (conn.next_event, lambda: conn.receive_data(b"x"), lambda: conn.send(make_request(10, 1))):
        with pytest.raises(LocalProtocolError):
            call()


def test_receive_buffer_is_bounded() -> None:
    conn = RemotingConnection(max_buffer_bytes=100)
    conn.receive_data(b"\x00" * 100)
    with pytest.raises(RemoteProtocolError):
        conn.receive_data(b"\x00")
    assert conn.state is ConnectionState.ERROR


def test_local_close() -> None:
    conn = RemotingConnection()
    req = conn.new_request(10)
    conn.send(req)
    assert conn.close() == (req.opaque,)
    assert conn.next_event() == ConnectionClosed(())


def test_responses_keep_serialize_type_of_request() -> None:
    binary = FRAMES[1][0]
    response = make_response(binary, 0)
    assert response.serialize_type is binary.serialize_type
    assert frame.decode(frame.encode(response)) == response


# ---- a large frame received into its own buffer (partial_frame_bytes / take_partial_frame / receive_frame)


@pytest.mark.parametrize("cut", [8, 9, 100, 5000])
def test_a_frame_taken_into_its_own_buffer_gives_the_event_the_stream_gives(cut: int) -> None:
    """Frames before it are events at once; the begun frame's size is known from its prefix; what is
    buffered of it moves to its own buffer, the rest is written there, and the whole frame decodes
    to the event a byte stream gives (a response matched to its pending request)."""
    conn = RemotingConnection()
    request = conn.new_request(RequestCode.PULL_MESSAGE, {"a": "b"})
    conn.send(request)
    big = frame.encode(make_response(request, ResponseCode.SUCCESS, body=bytes(range(256)) * 200))
    conn.receive_data(FRAMES[1][1] + big[:cut])
    assert drain(conn) == [FRAMES[1][0]]
    assert conn.partial_frame_bytes() == len(big)
    own = bytearray(len(big))
    assert conn.take_partial_frame(own) == cut
    assert conn.buffered_bytes == 0
    own[cut:] = big[cut:]
    event = conn.receive_frame(own, len(own))
    assert isinstance(event, Response)
    assert event.command == frame.decode(big)
    assert event.request_code == RequestCode.PULL_MESSAGE
    assert conn.pending == {}
    conn.receive_data(FRAMES[2][1])  # the stream goes on in the connection's buffer
    assert drain(conn) == _as_peer_events([FRAMES[2][0]])


def test_no_partial_frame_without_its_prefix_or_when_complete() -> None:
    conn = RemotingConnection()
    assert conn.partial_frame_bytes() == 0
    conn.receive_data(FRAMES[0][1][:7])  # a prefix is 8 bytes
    assert conn.partial_frame_bytes() == 0
    conn.receive_data(FRAMES[0][1][7:])
    assert conn.partial_frame_bytes() == 0  # complete: next_event takes it
    assert drain(conn) == _as_peer_events([FRAMES[0][0]])


def test_a_frame_received_whole_must_hold_exactly_one_frame() -> None:
    data = bytearray(FRAMES[0][1] + b"x")
    conn = RemotingConnection()
    with pytest.raises(RemoteProtocolError):
        conn.receive_frame(data, len(data))
    assert conn.state is ConnectionState.ERROR
    conn = RemotingConnection()
    assert conn.receive_frame(data, len(data) - 1) == _as_peer_events([FRAMES[0][0]])[0]  # a longer buffer
    conn.receive_data(b"\x00")
    with pytest.raises(LocalProtocolError):
        conn.receive_frame(bytearray(FRAMES[0][1]), len(FRAMES[0][1]))  # bytes buffered before it


def test_a_bad_prefix_is_refused_before_its_frame_is_buffered() -> None:
    conn = RemotingConnection()
    conn.receive_data(struct.pack(">iI", 1 << 30, 0))  # what next_event would refuse first
    with pytest.raises(RemoteProtocolError):
        conn.partial_frame_bytes()
    assert conn.state is ConnectionState.ERROR
