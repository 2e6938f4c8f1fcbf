"""The asyncio remoting driver on a real loopback socket: pipelining with out-of-order answers,
oneway requests both ways, timeouts, malformed frames, closing with requests pending."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from txmq.common import errors
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.server.remoting_transport import RemotingEndpoint, RemotingServer, connect, serve


async def _echo_after(request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
    """Answers code N after N milliseconds (so later requests can finish first); code 99 calls back."""
    if request.code == 99:
        endpoint.oneway(98, {"hello": "client"})
        return None if request.is_oneway else make_response(request)
    await asyncio.sleep(request.code / 1000)
    return make_response(request, 0, ext_fields={"code": str(request.code)}, body=request.body)


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    running = await serve("127.0.0.1", 0, _echo_after)
    yield running
    await running.close()


async def test_pipelined_requests_are_answered_by_opaque_in_any_order() -> None:
    release = asyncio.Event()  # the slow request is answered only after the fast ones (not after a delay:
    # a starved host could take longer than any delay to answer 200 requests)

    async def handle(request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand | None:
        if request.code == 300:
            await release.wait()
        return make_response(request, 0, body=request.body)

    running = await serve("127.0.0.1", 0, handle)
    client = await connect("127.0.0.1", running.port)
    slow = client.request_nowait(300, body=b"slow")
    fast = [client.request_nowait(1, body=str(i).encode()) for i in range(200)]
    answers = await asyncio.gather(*fast)
    assert [a.body for a in answers] == [str(i).encode() for i in range(200)]
    assert not slow.done()  # the slow one did not hold back the 200 behind it
    release.set()
    assert (await slow).body == b"slow"
    await client.close()
    await running.close()
    await client.close()


async def test_oneway_both_directions(server: RemotingServer) -> None:
    got: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def on_request(request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand | None:
        await got.put(request)
        return None

    client = await connect("127.0.0.1", server.port, handler=on_request)
    assert client.oneway(99)
    callback = await asyncio.wait_for(got.get(), 5)
    assert callback.code == 98
    assert callback.is_oneway
    assert callback.ext_fields == {"hello": "client"}
    await client.close()
    assert not client.oneway(99)  # closed: nothing written


async def test_timeout_then_late_answer_is_ignored(server: RemotingServer) -> None:
    client = await connect("127.0.0.1", server.port)
    with pytest.raises(errors.RequestTimeout):
        await client.request(200, timeout=0.01)
    assert (await client.request(1)).code == 0  # the connection is still usable
    await asyncio.sleep(0.25)  # the late answer to the timed-out request arrives and is dropped
    assert (await client.request(2)).ext_fields["code"] == "2"
    await client.close()


async def test_malformed_frame_closes_the_connection_and_fails_pending(server: RemotingServer) -> None:
    client = await connect("127.0.0.1", server.port)
    pending = client.request_nowait(500)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"\x00\x00\x00\x08\x05\x00\x00\x00junk")  # serialize type 5 does not exist
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    assert (await pending).code == 0  # the other connection was not affected
    await client.close()
    with pytest.raises(errors.ConnectionError_):
        await client.request(1)


async def test_server_close_fails_requests_in_flight() -> None:
    never: asyncio.Event = asyncio.Event()

    async def hang(request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand | None:
        await never.wait()
        return make_response(request)

    running = await serve("127.0.0.1", 0, hang)
    client = await connect("127.0.0.1", running.port)
    pending = client.request_nowait(1)
    await asyncio.sleep(0.05)
    await running.close()
    with pytest.raises(errors.ConnectionError_):
        await asyncio.wait_for(pending, 5)


async def test_handlers_finishing_at_once_or_awaiting_one_shared_future() -> None:
    """Handlers that finish without suspending, and many that await one future (as a group commit's
    waiters do), each inside a task; failures before and after suspending become SYSTEM_ERROR (oneway:
    nothing), and the connection goes on."""
    shared: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    tasks_seen: list[asyncio.Task[object] | None] = []

    async def nested(future: asyncio.Future[str]) -> str:
        return await future

    async def handle(request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand | None:
        if request.code == 1:  # no await at all
            return make_response(request, 0, body=b"inline")
        if request.code == 2:  # awaits the shared future two frames down
            value = await nested(shared)
            tasks_seen.append(asyncio.current_task())
            return make_response(request, 0, body=value.encode())
        if request.code == 3:
            raise RuntimeError("fails inline")
        await asyncio.sleep(0)  # code 4: fails after suspending
        raise RuntimeError("fails in its task")

    running = await serve("127.0.0.1", 0, handle)
    client = await connect("127.0.0.1", running.port)
    waiting = [client.request_nowait(2) for _ in range(50)]
    inline = [client.request_nowait(1) for _ in range(50)]
    assert {a.body for a in await asyncio.gather(*inline)} == {b"inline"}
    assert not any(w.done() for w in waiting)
    shared.set_result("shared")
    assert {a.body for a in await asyncio.gather(*waiting)} == {b"shared"}
    assert all(task is not None for task in tasks_seen)
    assert (await client.request(3)).code == ResponseCode.SYSTEM_ERROR
    assert (await client.request(4)).code == ResponseCode.SYSTEM_ERROR
    assert client.oneway(3) and client.oneway(4)
    assert (await client.request(1)).body == b"inline"  # the connection lived through all of it
    await client.close()
    await running.close()


async def test_a_suspended_long_poll_is_cancelled_when_its_client_goes_away() -> None:
    cancelled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    suspended = asyncio.Event()

    async def long_poll(request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand | None:
        try:
            suspended.set()
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set_result(None)
            raise
        return make_response(request)

    running = await serve("127.0.0.1", 0, long_poll)
    client = await connect("127.0.0.1", running.port)
    client.request_nowait(RequestCode.PULL_MESSAGE)
    await asyncio.wait_for(suspended.wait(), 30)  # not a fixed sleep: under load 50 ms was not enough
    await client.close()
    await asyncio.wait_for(cancelled, 30)
    await running.close()
