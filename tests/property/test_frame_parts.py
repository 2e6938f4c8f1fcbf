"""A request with a large body goes out as its frame's head and its body, unjoined (batchpath4.md):

* ``frame.encode_parts(cmd)`` joined is ``frame.encode(cmd)``, or both raise the same error;
* ``RemotingConnection.send_parts`` keeps the pending bookkeeping and errors of ``send``;
* a channel writes exactly the frames ``frame.encode`` makes, in order, whether a large-body request is
  written alone (``writelines``), held with others in a turn, or both, over a real socket (uvloop and
  asyncio), with bodies below, at and above the split size.
"""

from __future__ import annotations

import asyncio

import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client import _remoting_channel as rc
from txmq.common import limits
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import LanguageCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.connection import RemotingConnection
from txmq.protocol.remoting.errors import LocalProtocolError, RemoteProtocolError

_texts = st.text(max_size=12)
_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**16), 2**16),  # past the ROCKETMQ header's 16 bits too: its error
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | st.text(min_size=1, max_size=12),
    ext_fields=st.dictionaries(_texts, _texts, max_size=6),
    body=st.binary(max_size=40) | st.integers(0, 3).map(lambda n: bytes(range(256)) * (64 * n + 1)),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(2**16), 2**16),
    serialize_type=st.sampled_from(list(SerializeType)),
)


def _outcome(call: object, cmd: RemotingCommand) -> object:
    try:
        made = call(cmd)  # type: ignore[operator]
    except (LocalProtocolError, RemoteProtocolError, ValueError, OverflowError) as exc:
        return ("error", type(exc), str(exc))
    return made if type(made) is bytes else b"".join(made)


@given(_commands)
def test_encode_parts_joined_is_encode(cmd: RemotingCommand) -> None:
    expected = _outcome(frame.encode, cmd)
    assert _outcome(frame.encode_parts, cmd) == expected
    if type(expected) is bytes:
        head, body = frame.encode_parts(cmd)
        assert body is cmd.body or body == cmd.body
        assert head == expected[: len(expected) - len(cmd.body)]


def test_encode_parts_refuses_a_frame_over_the_limit_as_encode_does() -> None:
    cmd = RemotingCommand(code=1, body=b"\0" * limits.frame_bytes_max)
    for encoder in (frame.encode, frame.encode_parts):
        with pytest.raises(LocalProtocolError, match="exceeds the limit"):
            encoder(cmd)


_sends = st.lists(
    st.tuples(st.booleans(), st.integers(0, 5), st.booleans()),  # oneway, opaque, a bad code
    max_size=12,
)


@given(_sends, st.integers(1, 4), st.booleans())
def test_send_parts_keeps_sends_bookkeeping(
    sends: list[tuple[bool, int, bool]], cap: int, close: bool
) -> None:
    """Twin connections, one sent to with ``send``, one with ``send_parts``: the same bytes or errors,
    and the same pending requests."""
    twins = RemotingConnection(max_pending=cap), RemotingConnection(max_pending=cap)
    if close:
        for conn in twins:
            conn.close()
    for oneway, opaque, bad in sends:
        cmd = RemotingCommand(code=70000 if bad else 320, opaque=opaque, flag=2 if oneway else 0, body=b"b")
        outcomes = [_outcome(twins[0].send, cmd), _outcome(twins[1].send_parts, cmd)]
        assert outcomes[0] == outcomes[1]
        assert twins[0]._pending == twins[1]._pending


def _frames(stream: bytes) -> list[RemotingCommand]:
    commands = []
    pos = 0
    while pos < len(stream):
        decoded = frame.decode_frame(stream, pos)
        assert decoded is not None, "a frame cut short"
        cmd, pos = decoded
        commands.append(cmd)
    return commands


async def _round(serialize_type: SerializeType, plan: list[list[int]]) -> None:
    """Each inner list's requests started in one loop turn, bodies of those sizes; a real socket."""
    received = bytearray()
    done = asyncio.Event()
    expected_bytes = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            received.extend(chunk)
            if len(received) >= expected_bytes:
                done.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    channel = rc.RemotingChannel(f"127.0.0.1:{port}", None, serialize_type)
    await asyncio.get_running_loop().create_connection(lambda: channel, "127.0.0.1", port)
    sent: list[tuple[int, dict[str, str], bytes]] = []
    try:
        n = 0
        for turn in plan:
            for size in turn:
                n += 1
                ext = {"n": str(n)}
                body = bytes([n % 251]) * size
                sent.append((900 + n, ext, body))
                channel.start_request(900 + n, ext, body, timeout_s=30.0)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        commands = [
            RemotingCommand(
                code=code,
                opaque=opaque,
                ext_fields=ext,
                body=body,
                language=channel._conn.language,
                version=channel._conn.version,
                serialize_type=serialize_type,
            )
            for (code, ext, body), opaque in zip(sent, sorted(channel._futures), strict=True)
        ]
        expected = b"".join(frame.encode(cmd) for cmd in commands)
        expected_bytes = len(expected)
        if len(received) < expected_bytes:
            await asyncio.wait_for(done.wait(), 10)
        assert bytes(received) == expected  # byte for byte what one joined frame per request makes
        assert [(c.code, c.ext_fields, c.body) for c in _frames(bytes(received))] == sent
    finally:
        channel._fail("test over")
        for future in list(channel._futures.values()):
            future.exception()
        await channel.close()
        server.close()
        await server.wait_closed()


_SPLIT = rc._SPLIT_BODY_BYTES
_PLANS = [
    [[_SPLIT]],  # alone: head and body with writelines
    [[_SPLIT - 1]],  # alone, joined as before
    [[107_000], [0, 3 * _SPLIT, 10, _SPLIT + 1], [1024] * 40, [200_000, 200_000]],
    [[1024] * 5 + [_SPLIT] + [1024] * 40 + [2 * _SPLIT] * 3],  # held small and large past the cap
]


@pytest.mark.parametrize("serialize_type", list(SerializeType))
@pytest.mark.parametrize("plan", _PLANS)
@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_channel_writes_the_joined_frames_bytes(
    loop: str, plan: list[list[int]], serialize_type: SerializeType
) -> None:
    if loop == "uvloop":
        uvloop.run(_round(serialize_type, plan))
    else:
        asyncio.run(_round(serialize_type, plan))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0, 1, 1024, _SPLIT - 1, _SPLIT, 40_000]), max_size=6), max_size=4))
def test_any_plan_writes_the_joined_frames_bytes(plan: list[list[int]]) -> None:
    uvloop.run(_round(SerializeType.ROCKETMQ, plan))
