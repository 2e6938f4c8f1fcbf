"""The SDK's remoting channel against a real remoting server: oneway frames are held until the end of
the loop turn (or the next write) and keep their order on the connection."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from txmq.client._remoting_channel import ChannelPool, RemotingChannel
from txmq.common import errors
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import ResponseCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.server.remoting_transport import RemotingEndpoint, serve

ONEWAY, REQUEST = 901, 902


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[int, str]] = []
        self.arrived = asyncio.Event()

    async def handle(self, request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        self.seen.append((request.code, request.ext_fields.get("n", "")))
        self.arrived.set()
        return None if request.is_oneway else make_response(request, ResponseCode.SUCCESS)

    async def wait_for(self, count: int) -> None:
        while len(self.seen) < count:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 5)


async def test_oneway_frames_keep_their_order_before_the_next_request() -> None:
    recorder = Recorder()
    server = await serve("127.0.0.1", 0, recorder.handle)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        await channel.oneway(ONEWAY, {"n": "1"})
        await channel.oneway(ONEWAY, {"n": "2"})
        reply = await channel.request(REQUEST, {"n": "3"})  # same loop turn: one write for all three
        assert reply.code == ResponseCode.SUCCESS
        await recorder.wait_for(3)
        assert recorder.seen == [(ONEWAY, "1"), (ONEWAY, "2"), (REQUEST, "3")]
    finally:
        await channel.close()
        await server.close()


async def test_a_lone_oneway_is_written_at_the_end_of_the_turn() -> None:
    recorder = Recorder()
    server = await serve("127.0.0.1", 0, recorder.handle)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        await channel.oneway(ONEWAY, {"n": "alone"})
        await recorder.wait_for(1)  # nothing else is ever written: the held frame went out by itself
        assert recorder.seen == [(ONEWAY, "alone")]
    finally:
        await channel.close()
        await server.close()


async def test_close_writes_held_oneway_frames_first() -> None:
    recorder = Recorder()
    server = await serve("127.0.0.1", 0, recorder.handle)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        await channel.oneway(ONEWAY, {"n": "last"})
        await channel.close()  # in the same turn as the oneway
        await recorder.wait_for(1)
        assert recorder.seen == [(ONEWAY, "last")]
    finally:
        await server.close()


SILENT = 903  # a two-way request the server never answers


async def _answer_but_silent(request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
    if request.code == SILENT or request.is_oneway:
        return None
    return make_response(request, ResponseCode.SUCCESS, ext_fields={"n": request.ext_fields.get("n", "")})


async def test_an_unanswered_request_times_out_while_others_are_answered() -> None:
    server = await serve("127.0.0.1", 0, _answer_but_silent)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        silent = asyncio.ensure_future(channel.request(SILENT, {}, timeout_s=0.3))
        replies = await asyncio.gather(*(channel.request(REQUEST, {"n": str(i)}) for i in range(50)))
        assert [r.ext_fields["n"] for r in replies] == [str(i) for i in range(50)]
        with pytest.raises(errors.RequestTimeout, match=f"request code {SILENT}"):
            await silent
        assert channel.in_flight == 0
        assert channel.is_open  # a timeout does not break the connection
        assert (await channel.request(REQUEST, {"n": "after"})).ext_fields["n"] == "after"
    finally:
        await channel.close()
        await server.close()


async def test_a_shorter_timeout_sent_later_expires_first() -> None:
    # deadlines are kept in send order per timeout: a short one behind a long one must not wait for it
    server = await serve("127.0.0.1", 0, _answer_but_silent)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        long = asyncio.ensure_future(channel.request(SILENT, {}, timeout_s=60))
        await asyncio.sleep(0)
        short = asyncio.ensure_future(channel.request(SILENT, {}, timeout_s=0.2))
        await channel.request(REQUEST, {"n": "alive"})  # the peer talks: the connection is not silent
        with pytest.raises(errors.RequestTimeout):
            await short
        assert not long.done()
        long.cancel()
    finally:
        await channel.close()
        await server.close()


async def _blackhole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A peer that takes every byte and says nothing (a dropped route, a half-dead proxy)."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass
    writer.close()


async def test_a_request_unanswered_on_a_silent_connection_closes_it() -> None:
    server = await asyncio.start_server(_blackhole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = await RemotingChannel.open(f"127.0.0.1:{port}")
    try:
        long = channel.start_request(REQUEST, {}, timeout_s=60)
        with pytest.raises(errors.RequestTimeout):
            await channel.request(REQUEST, {}, timeout_s=0.2)
        assert not channel.is_open  # nothing arrived since the request: dead, not slow
        with pytest.raises(errors.ConnectionError_, match="silent"):
            await long  # the others on it fail at once (retriable), not after their own timeouts
    finally:
        await channel.close()
        server.close()
        await server.wait_closed()


async def test_the_pool_replaces_a_connection_closed_for_silence() -> None:
    server = await asyncio.start_server(_blackhole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ChannelPool()
    try:
        first = await pool.get(f"127.0.0.1:{port}")
        with pytest.raises(errors.RequestTimeout):
            await first.request(REQUEST, {}, timeout_s=0.2)
        second = await pool.get(f"127.0.0.1:{port}")
        assert second is not first and second.is_open
    finally:
        await pool.close()
        server.close()
        await server.wait_closed()


async def test_start_request_resolves_without_a_task_and_fails_on_close() -> None:
    server = await serve("127.0.0.1", 0, _answer_but_silent)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        futures = [channel.start_request(REQUEST, {"n": str(i)}) for i in range(10)]
        assert [(await f).ext_fields["n"] for f in futures] == [str(i) for i in range(10)]
        pending = channel.start_request(SILENT, {}, timeout_s=60)
        await channel.close()
        with pytest.raises(errors.ConnectionError_):
            await pending
        with pytest.raises(errors.ConnectionError_):
            channel.start_request(REQUEST, {})
    finally:
        await channel.close()
        await server.close()


async def test_answered_requests_behind_an_unanswered_one_do_not_pile_up() -> None:
    # the sweep waits for the oldest deadline; what was answered meanwhile must not be kept until then
    server = await serve("127.0.0.1", 0, _answer_but_silent)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        silent = asyncio.ensure_future(channel.request(SILENT, {}, timeout_s=60))
        for _ in range(20):
            await asyncio.gather(*(channel.request(REQUEST, {}) for _ in range(500)))
        kept = sum(len(q) for q in channel._deadlines.values())
        assert kept <= 2 * channel.in_flight + 1024 + 1
        silent.cancel()
    finally:
        await channel.close()
        await server.close()


async def test_responses_arrive_through_the_protocol_callback_without_a_read_task() -> None:
    """The channel is its connection's protocol: no stream reader and no task per connection wait
    for bytes (one task wake-up fewer per response)."""
    recorder = Recorder()
    server = await serve("127.0.0.1", 0, recorder.handle)
    before = asyncio.all_tasks()
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        assert isinstance(channel, asyncio.BufferedProtocol)
        assert asyncio.all_tasks() - before == set()
        response = await channel.request(REQUEST, {"n": "1"}, timeout_s=5)
        assert response.code == ResponseCode.SUCCESS
    finally:
        await channel.close()
        await server.close()


class _NotReading(asyncio.Protocol):
    """A peer that stops reading at once, until ``resume``; counts the bytes it got."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.received = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.pause_reading()  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        self.received += len(data)


async def test_a_request_waits_for_a_full_socket_buffer_to_drain_then_is_written_whole() -> None:
    peers: list[_NotReading] = []

    def factory() -> _NotReading:
        peers.append(_NotReading())
        return peers[-1]

    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = await RemotingChannel.open(f"127.0.0.1:{port}")
    body = b"x" * (8 << 20)  # far beyond the socket buffers and the 1 MiB drain mark
    task = asyncio.get_running_loop().create_task(channel.request(REQUEST, {}, body, timeout_s=30))
    try:
        await asyncio.sleep(0.3)
        assert not task.done()  # still waiting for the buffer to drain (the peer does not read)
        assert peers[0].transport is not None
        peers[0].transport.resume_reading()
        for _ in range(500):
            if peers[0].received >= len(body):
                break
            await asyncio.sleep(0.01)
        assert peers[0].received >= len(body)  # every byte written once the peer read again
        assert channel.is_open and not task.done()  # now waiting for the answer, which never comes
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await channel.close()
        server.close()


class _Sink:
    """A transport that keeps what is written (the channel driven by hand, without a socket)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        pass


def _feed(channel: RemotingChannel, data: bytes, chunk: int) -> list[int]:
    """Deliver ``data`` as the event loop does (``get_buffer``, at most ``chunk`` bytes read into it,
    ``buffer_updated``); returns the size of every buffer the channel offered."""
    offered = []
    pos = 0
    while pos < len(data):
        buffer = channel.get_buffer(-1)
        offered.append(len(buffer))
        n = min(len(buffer), chunk, len(data) - pos)
        buffer[:n] = data[pos : pos + n]
        pos += n
        channel.buffer_updated(n)
    return offered


async def test_a_large_answer_is_read_into_its_own_buffer_between_small_ones() -> None:
    """Once a large frame's prefix is in, the channel offers a buffer of exactly the rest of that
    frame (read there, not appended to the connection's buffer and copied out); small frames around it
    go through the read buffer; the next large frames reuse that buffer (a smaller one) or get a
    larger one; every answer reaches its request whole, in any read sizes."""
    from txmq.protocol.remoting import frame

    body = bytes(range(251)) * 4200  # ~1 MiB
    bodies = (b"a", body, b"b", body[:100_000], body + body, body[7:])
    for chunk in (7, 65_536, 300_000, 2_000_000):
        channel = RemotingChannel("test:1", None)
        channel.connection_made(_Sink())  # type: ignore[arg-type]
        futures = [channel.start_request(REQUEST, {"n": str(i)}) for i in range(len(bodies))]
        opaques = sorted(channel._futures)
        answers = [
            frame.encode(make_response(RemotingCommand(REQUEST, opaque), body=b))
            for opaque, b in zip(opaques, bodies, strict=True)
        ]
        offered = _feed(channel, b"".join(answers), chunk)
        for future, b in zip(futures, bodies, strict=True):
            assert (await future).body == b
        taken = min(chunk, 256 * 1024) if chunk > len(answers[0]) else None
        if taken is not None:  # the first read held the prefix: the rest of the frame is offered whole
            assert len(answers[1]) - (taken - len(answers[0])) in offered, (chunk, offered[:4])
        assert channel.get_buffer(-1).nbytes == 256 * 1024  # back to the read buffer
        channel._fail("done")


async def test_reads_reach_the_connection_as_bytes() -> None:
    """What lands in the reused read buffer reaches the connection as ``bytes`` (held, or joined to the
    short rest of a read that ended inside a frame; decoded by slicing, not through a ``bytearray``);
    the answers of reads cut anywhere reach their requests."""
    for chunk in (5, 50, 1000):
        channel = RemotingChannel("test:1", None)
        channel.connection_made(_Sink())  # type: ignore[arg-type]
        futures = [channel.start_request(REQUEST, {"n": str(i)}) for i in range(20)]
        opaques = sorted(channel._futures)
        data = b"".join(
            frame.encode(make_response(RemotingCommand(REQUEST, opaque), body=b"x" * opaque))
            for opaque in opaques
        )
        pos = 0
        while pos < len(data):
            n = min(chunk, len(data) - pos)
            channel.get_buffer(-1)[:n] = data[pos : pos + n]
            pos += n
            channel.buffer_updated(n)
            assert type(channel._conn._buf) is bytes
        for future, opaque in zip(futures, opaques, strict=True):
            assert (await future).body == b"x" * opaque
        channel._fail("done")


async def _large_and_small_answers_over_a_socket() -> None:
    body = bytes(range(251)) * 12_600  # ~3 MiB, no period of 4 KiB

    async def handle(request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        return make_response(request, ResponseCode.SUCCESS, body=body[: int(request.ext_fields["n"])])

    server = await serve("127.0.0.1", 0, handle)
    channel = await RemotingChannel.open(f"127.0.0.1:{server.port}")
    try:
        sizes = [10, 70_000, len(body), 5, 1 << 20, 65_536, 65_535, 0] * 3
        futures = [channel.start_request(REQUEST, {"n": str(n)}, timeout_s=30) for n in sizes]
        for n, future in zip(sizes, futures, strict=True):
            assert (await future).body == body[:n], n
        kept = channel._kept  # the large answers were read into a buffer of their own, kept for the next
        assert kept is not None and len(kept) >= len(body)
    finally:
        await channel.close()
        await server.close()


async def test_pipelined_large_and_small_answers_arrive_whole_over_a_socket() -> None:
    await _large_and_small_answers_over_a_socket()


def test_pipelined_large_and_small_answers_arrive_whole_over_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")
    uvloop.run(_large_and_small_answers_over_a_socket())


class _RecordingTransport(asyncio.Transport):
    """Keeps what the channel writes, one entry per write call."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


async def test_frames_held_past_the_cap_go_out_before_the_turn_ends() -> None:
    """Many requests sent in one loop turn are written in pieces of about ``_HOLD_BYTES_MAX`` while the
    turn goes on (the broker starts on the first while the rest are built), in their order; the
    remainder goes out at the end of the turn."""
    from txmq.client import _remoting_channel as rc

    channel = rc.RemotingChannel("127.0.0.1:1", None)
    transport = _RecordingTransport()
    channel.connection_made(transport)
    body = b"x" * 1024
    count = 4 * rc._HOLD_BYTES_MAX // len(body)
    for _ in range(count):
        channel.start_request(REQUEST, {}, body)
    in_turn = list(transport.writes)
    assert len(in_turn) >= 4  # the first (nothing in flight) and at least three pieces of held frames
    assert all(len(w) <= rc._HOLD_BYTES_MAX + 2 * len(body) for w in in_turn)
    await asyncio.sleep(0)  # the end of the turn: the rest
    await asyncio.sleep(0)
    assert channel.in_flight == count
    written = b"".join(transport.writes)
    assert written.count(body) == count
    assert len(transport.writes) <= count // 16 + 2  # still coalesced, not a write per frame
    opaques = [opaque for opaque, _ in sorted(channel._futures.items())]
    assert opaques == sorted(opaques)
    channel._fail("test over")
    for future in list(channel._futures.values()):
        future.exception()


@pytest.mark.parametrize("serialize_type", [None, SerializeType.JSON])
async def test_requests_carry_the_rocketmq_header_and_are_answered_in_their_serialization(
    serialize_type: SerializeType | None,
) -> None:
    """The SDK's default is the ROCKETMQ binary header (cheaper for both ends to read); a JSON channel
    still speaks JSON. The broker answers in the request's serialization, as Apache's does."""
    seen: list[SerializeType] = []

    async def handle(request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        seen.append(request.serialize_type)
        return (
            None if request.is_oneway else make_response(request, ResponseCode.SUCCESS, ext_fields={"n": "é"})
        )

    server = await serve("127.0.0.1", 0, handle)
    channel = RemotingChannel(f"127.0.0.1:{server.port}", None, *([serialize_type] if serialize_type else []))
    loop = asyncio.get_running_loop()
    await loop.create_connection(lambda: channel, "127.0.0.1", server.port)
    expected = serialize_type or SerializeType.ROCKETMQ
    try:
        assert channel.binary is (expected is SerializeType.ROCKETMQ)
        reply = await channel.request(REQUEST, {"n": "1"})
        if channel.binary:
            rendered = await channel.answer(
                channel.start_binary_request(REQUEST, frame.binary_ext({"n": "2"}), b"", timeout_s=3.0)
            )
            channel.start_binary_oneway(ONEWAY, frame.binary_pair("n", "3"))
        else:
            rendered = await channel.answer(
                channel.start_json_request(REQUEST, '{"n":"2"}', b"", timeout_s=3.0)
            )
            channel.start_json_oneway(ONEWAY, '{"n":"3"}')
        await channel.request(REQUEST, {"n": "4"})
        for answer in (reply, rendered):
            assert answer.serialize_type is expected and answer.ext_fields == {"n": "é"}
        assert seen == [expected] * 4
    finally:
        await channel.close()
        await server.close()
