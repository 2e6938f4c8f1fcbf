"""The SDK's remoting channel against a real remoting server: oneway frames are held until the end of
the loop turn (or the next write) and keep their order on the connection."""

from __future__ import annotations

import asyncio

from txmq.client._remoting_channel import RemotingChannel
from txmq.protocol.remoting.codes import ResponseCode
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
