"""``txmq broker`` over remoting: send, pull, offsets, long polling, batches, routes, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.integration.remoting_support import RunningBroker, broker_process, send, send_header
from txmq.protocol.remoting.bodies import (
    ConsumerData,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueueData,
    SubscriptionData,
    TopicConfigWrapper,
    TopicRouteData,
)
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
    # suspended longer than the test waits: only the arrival's wake-up can answer it in time
    waiting = client.request_nowait(RequestCode.PULL_MESSAGE, pull_header("RemB", 1, suspend_ms=60_000))
    # the same connection keeps serving other requests while the pull waits
    reply = await send(client, "RemB", b"second", queue_id=0)
    assert reply.code == ResponseCode.SUCCESS
    woken = await asyncio.wait_for(waiting, 45)
    assert woken.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(woken.body)] == [b"second"]


async def test_offsets_commit_query_and_missing_group(client: RemotingEndpoint) -> None:
    await send(client, "RemC", b"x", queue_id=0)
    query = {"consumerGroup": "GC", "topic": "RemC", "queueId": "0"}
    # a client that says "do not set zero" (txmq's SDK) hears that the group has no offset ...
    missing = await client.request(RequestCode.QUERY_CONSUMER_OFFSET, {**query, "setZeroIfNotFound": "false"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    # ... a 4.x client (no such field) is told 0 for a young queue, as RocketMQ's broker tells it, so a
    # new group reads the queue from its start instead of the client reporting an error
    young = await client.request(RequestCode.QUERY_CONSUMER_OFFSET, query)
    assert young.code == ResponseCode.SUCCESS
    assert young.ext_fields["offset"] == "0"
    empty = await client.request(RequestCode.QUERY_CONSUMER_OFFSET, {**query, "queueId": "3"})
    assert (empty.code, empty.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
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


@pytest.mark.parametrize("body", [b'{"consumerDataSet": 5}', b'{"consumerDataSet": true}'])
async def test_heartbeat_with_a_non_list_consumer_set_is_refused_clearly(
    client: RemotingEndpoint, body: bytes
) -> None:
    """Regression (found by tests/fuzz/test_fuzz_raw_frames.py in a full run): a consumerDataSet that is
    not a list raised TypeError while the C++ clients' numeric enums were mapped: "internal error"."""
    reply = await client.request(RequestCode.HEART_BEAT, body=body)
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert "consumerDataSet" in (reply.remark or "")
    assert (await client.request(RequestCode.HEART_BEAT, body=b"{}")).code == ResponseCode.SUCCESS


async def test_heartbeat_consumer_list_locks_and_unregister(client: RemotingEndpoint) -> None:
    consumer = ConsumerData("GL", subscriptions=[SubscriptionData("RemL", "a || b")])
    beat = await client.request(RequestCode.HEART_BEAT, body=HeartbeatData("cid-1", [], [consumer]).to_json())
    assert beat.code == ResponseCode.SUCCESS
    listed = await client.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GL"})
    assert ConsumerListBody.from_json(listed.body).consumer_id_list == ["cid-1"]
    queues = [MessageQueueData("RemL", "broker-a", 0), MessageQueueData("RemL", "broker-a", 1)]
    mine = await client.request(
        RequestCode.LOCK_BATCH_MQ, body=LockBatchRequestBody("GL", "cid-1", queues).to_json()
    )
    assert len(LockBatchResponseBody.from_json(mine.body).lock_ok_mq_set) == 2
    theirs = await client.request(
        RequestCode.LOCK_BATCH_MQ, body=LockBatchRequestBody("GL", "cid-2", queues).to_json()
    )
    assert LockBatchResponseBody.from_json(theirs.body).lock_ok_mq_set == []
    await client.request(
        RequestCode.UNLOCK_BATCH_MQ, body=LockBatchRequestBody("GL", "cid-1", queues[:1]).to_json()
    )
    theirs = await client.request(
        RequestCode.LOCK_BATCH_MQ, body=LockBatchRequestBody("GL", "cid-2", queues).to_json()
    )
    assert [mq.queue_id for mq in LockBatchResponseBody.from_json(theirs.body).lock_ok_mq_set] == [0]
    # the subscription from the heartbeat filters pulls that do not carry one
    for tag in ("a", "c", "b"):
        await send(client, "RemL", tag.encode(), {"TAGS": tag}, queue_id=0)
    pulled = await client.request(RequestCode.PULL_MESSAGE, pull_header("RemL", 0, group="GL"))
    assert [m.body for m in decode_messages(pulled.body)] == [b"a", b"b"]
    await client.request(RequestCode.UNREGISTER_CLIENT, {"clientID": "cid-1", "consumerGroup": "GL"})
    listed = await client.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "GL"})
    assert ConsumerListBody.from_json(listed.body).consumer_id_list == []


async def test_admin_topic_query_by_key_and_view_by_id(client: RemotingEndpoint) -> None:
    create = {
        "topic": "RemAdmin", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
        "perm": "6",
    }  # fmt: skip
    assert (await client.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create)).code == ResponseCode.SUCCESS
    table = TopicConfigWrapper.from_json((await client.request(RequestCode.GET_ALL_TOPIC_CONFIG)).body)
    assert table.topic_config_table["RemAdmin"].write_queue_nums == 2
    sent = await send(client, "RemAdmin", b"findme", {"KEYS": "order-42"}, queue_id=1)
    query = {
        "topic": "RemAdmin",
        "key": "order-42",
        "maxNum": "8",
        "beginTimestamp": "0",
        "endTimestamp": "0",
    }
    found = await client.request(RequestCode.QUERY_MESSAGE, query)
    assert [m.body for m in decode_messages(found.body)] == [b"findme"]
    offset = int(sent.ext_fields["msgId"][16:], 16)
    viewed = await client.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    assert decode_messages(viewed.body)[0].body == b"findme"
    missing = await client.request(RequestCode.QUERY_MESSAGE, {**query, "key": "nope"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND


async def test_send_back_over_remoting_goes_to_the_retry_topic(client: RemotingEndpoint) -> None:
    sent = await send(client, "RemR", b"fail-me", queue_id=0)
    offset = int(sent.ext_fields["msgId"][16:], 16)
    back = {
        "offset": str(offset),
        "group": "GR",
        "delayLevel": "0",
        "originTopic": "RemR",
        "maxReconsumeTimes": "0",
    }
    assert (await client.request(RequestCode.CONSUMER_SEND_MSG_BACK, back)).code == ResponseCode.SUCCESS
    dlq = await client.request(RequestCode.PULL_MESSAGE, pull_header("%DLQ%GR", 0, group="GR"))
    assert [m.body for m in decode_messages(dlq.body)] == [b"fail-me"]  # maxReconsumeTimes 0: straight to DLQ


async def test_properties_with_a_lone_surrogate_are_refused_clearly(client: RemotingEndpoint) -> None:
    """A JSON header may carry ``\\ud800``: decoded, that is no text UTF-8 can hold. It must be refused as
    an illegal message naming the properties, not answered "internal error"."""
    ext = send_header("RemSur", {})
    ext["i"] = "color\x01red\x02note\x01\ud800\x02"  # SEND_MESSAGE_V2's short name of the properties
    reply = await client.request(RequestCode.SEND_MESSAGE_V2, ext, b"x")
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert "properties" in (reply.remark or "")
    assert (await send(client, "RemSur", b"fine")).code == ResponseCode.SUCCESS


async def test_a_pull_at_a_negative_offset_is_moved_to_the_queue_minimum(client: RemotingEndpoint) -> None:
    """A negative queue offset was answered SYSTEM_ERROR: a 4.x consumer stuck there never recovers.
    Apache's broker answers PULL_OFFSET_MOVED with nextBeginOffset = the queue's minimum (getMessage:
    OFFSET_TOO_SMALL; an empty or unknown queue: NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE, moved
    to 0), so the client corrects its offset and reads on."""
    reply = await send(client, "RemNeg", b"first", queue_id=0)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    for topic in ("RemNeg", "RemNegNever"):
        moved = await client.request(RequestCode.PULL_MESSAGE, pull_header(topic, -1))
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED, (topic, moved.code, moved.remark)
        assert moved.ext_fields["nextBeginOffset"] == "0"
    again = await client.request(RequestCode.PULL_MESSAGE, pull_header("RemNeg", 0))
    assert [m.body for m in decode_messages(again.body)] == [b"first"]
