"""``txmq broker`` over remoting: send, pull, offsets, long polling, batches, routes, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.integration.remoting_support import RunningBroker, broker_process, send, send_header
from txmq.protocol.remoting.bodies import TopicRouteData
from txmq.protocol.remoting.codes import PULL_COMMIT_OFFSET, PULL_SUSPEND, RequestCode, ResponseCode
from txmq.protocol.remoting.headers import PullMessageRequestHeader
from txmq.protocol.remoting.message_codec import BatchMessage, decode_messages, encode_batch
from txmq.server.remoting_transport import RemotingEndpoint, connect


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with broker_process(tmp_path_factory.mktemp("remoting")) as running:
        yield running


@pytest.fixture
async def client(broker: RunningBroker) -> AsyncIterator[RemotingEndpoint]:
    endpoint = await connect(broker.host, broker.remoting_port)
    yield endpoint
    await endpoint.close()


def pull_header(
    topic: str, offset: int, *, group: str = "G", suspend_ms: int = 0, commit: int = -1
) -> dict[str, str]:
    flag = (PULL_SUSPEND if suspend_ms else 0) | (PULL_COMMIT_OFFSET if commit >= 0 else 0)
    return PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=32, sys_flag=flag,
        commit_offset=commit, suspend_timeout_millis=suspend_ms,
    ).to_ext_fields()  # fmt: skip


async def test_send_then_pull_returns_the_records(client: RemotingEndpoint) -> None:
    for i in range(3):
        reply = await send(client, "RemA", f"m{i}".encode(), {"TAGS": "t", "KEYS": f"k{i}"}, queue_id=0)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        assert len(reply.ext_fields["msgId"]) == 32
        assert reply.ext_fields["queueOffset"] == str(i)
    reply = await client.request(RequestCode.PULL_MESSAGE, pull_header("RemA", 0))
    assert reply.code == ResponseCode.SUCCESS
    records = decode_messages(reply.body)
    assert [r.body for r in records] == [b"m0", b"m1", b"m2"]
    assert records[1].properties["KEYS"] == "k1"
    assert records[0].topic == "RemA"
    assert reply.ext_fields["nextBeginOffset"] == "3"
    empty = await client.request(RequestCode.PULL_MESSAGE, pull_header("RemA", 3))
    assert empty.code == ResponseCode.PULL_NOT_FOUND


async def test_long_poll_is_woken_by_an_arrival_and_does_not_block_the_connection(
    client: RemotingEndpoint,
) -> None:
    await send(client, "RemB", b"first", queue_id=0)
    waiting = client.request_nowait(RequestCode.PULL_MESSAGE, pull_header("RemB", 1, suspend_ms=20_000))
    # the same connection keeps serving other requests while the pull waits
    reply = await send(client, "RemB", b"second", queue_id=0)
    assert reply.code == ResponseCode.SUCCESS
    woken = await asyncio.wait_for(waiting, 10)
    assert woken.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(woken.body)] == [b"second"]


async def test_offsets_commit_query_and_missing_group(client: RemotingEndpoint) -> None:
    await send(client, "RemC", b"x", queue_id=0)
    query = {"consumerGroup": "GC", "topic": "RemC", "queueId": "0"}
    missing = await client.request(RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    await client.request(RequestCode.PULL_MESSAGE, pull_header("RemC", 0, group="GC", commit=1))
    found = await client.request(RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert found.code == ResponseCode.SUCCESS
    assert found.ext_fields["offset"] == "1"
    update = await client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**query, "commitOffset": "0"})
    assert update.code == ResponseCode.SUCCESS
    found = await client.request(RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert found.ext_fields["offset"] == "0"
    top = await client.request(RequestCode.GET_MAX_OFFSET, {"topic": "RemC", "queueId": "0"})
    low = await client.request(RequestCode.GET_MIN_OFFSET, {"topic": "RemC", "queueId": "0"})
    assert (low.ext_fields["offset"], top.ext_fields["offset"]) == ("0", "1")


async def test_batch_is_atomic_and_pipelined_sends_all_succeed(client: RemotingEndpoint) -> None:
    body = encode_batch([BatchMessage(f"b{i}".encode(), {"TAGS": "x"}) for i in range(10)])
    reply = await client.request(RequestCode.SEND_BATCH_MESSAGE, send_header("RemD", {}, queue_id=0), body)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert len(reply.ext_fields["msgId"].split(",")) == 10
    futures = [client.request_nowait(RequestCode.SEND_MESSAGE_V2, send_header("RemD", {}, queue_id=0), b"p")
               for _ in range(200)]  # fmt: skip
    replies = await asyncio.gather(*futures)
    assert all(r.code == ResponseCode.SUCCESS for r in replies)
    offsets = sorted(int(r.ext_fields["queueOffset"]) for r in replies)
    assert offsets == list(range(10, 210))


async def test_errors_map_to_response_codes(client: RemotingEndpoint) -> None:
    unknown = await client.request(9999, {})
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    empty = await send(client, "RemE", b"")
    assert empty.code == ResponseCode.MESSAGE_ILLEGAL
    assert empty.remark
    missing_field = await client.request(RequestCode.PULL_MESSAGE, {"topic": "RemE"})
    assert missing_field.code == ResponseCode.MESSAGE_ILLEGAL


async def test_route_through_the_embedded_name_server(broker: RunningBroker) -> None:
    endpoint = await connect(broker.host, broker.namesrv_port)
    try:
        reply = await endpoint.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "RemRoute"})
        assert reply.code == ResponseCode.SUCCESS
        assert b"{0:" in reply.body  # fastjson's bare integer key, as real clients expect
        route = TopicRouteData.from_json(reply.body)
        assert route.broker_datas[0].broker_addrs == {0: f"127.0.0.1:{broker.remoting_port}"}
        assert route.queue_datas[0].write_queue_nums == 4
    finally:
        await endpoint.close()


async def test_a_malformed_frame_closes_only_that_connection(
    broker: RunningBroker, client: RemotingEndpoint
) -> None:
    reader, writer = await asyncio.open_connection(broker.host, broker.remoting_port)
    writer.write(b"\x7f\xff\xff\xff garbage")
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()
    reply = await send(client, "RemF", b"still fine")
    assert reply.code == ResponseCode.SUCCESS
