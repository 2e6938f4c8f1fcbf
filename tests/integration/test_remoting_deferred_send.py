"""Sends answered from a callback on the group write (no task per request): the answers, their
order, a group write that fails (ENOSPC) and oneway sends, through the real transport on loopback
with an in-process broker on a FaultyFileSystem (ASYNC flush: acknowledged once written)."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator
from typing import cast

import pytest

from tests.integration.remoting_support import Door, in_process_door, send_header
from txmq.broker.send import SendContext
from txmq.common.message import LeanMessage
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.command import make_request
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import Deferred


@pytest.fixture
async def door() -> AsyncIterator[Door]:
    async with in_process_door() as made:
        yield made


async def test_pipelined_sends_are_answered_in_order_with_their_offsets(door: Door) -> None:
    futures = [
        door.client.request_nowait(
            RequestCode.SEND_MESSAGE_V2, send_header("Def", {}, queue_id=1), b"m%d" % i
        )
        for i in range(300)
    ]
    replies = await asyncio.gather(*futures)
    assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 300
    assert [int(r.ext_fields["queueOffset"]) for r in replies] == list(range(300))
    assert all(r.ext_fields["queueId"] == "1" for r in replies)
    stored = door.broker.store.read_queue("Def", 1, 0, 300)
    assert [m.body for m in stored.records] == [b"m%d" % i for i in range(300)]


async def test_a_failed_group_write_answers_every_send_of_the_group_with_an_error(door: Door) -> None:
    ok = await door.client.request(RequestCode.SEND_MESSAGE_V2, send_header("DefF", {}, queue_id=0), b"a")
    assert ok.code == ResponseCode.SUCCESS
    door.fs.fail_next_write(errno.ENOSPC)
    futures = [
        door.client.request_nowait(RequestCode.SEND_MESSAGE_V2, send_header("DefF", {}, queue_id=0), b"b")
        for _ in range(20)
    ]
    replies = await asyncio.gather(*futures)
    failed = [r for r in replies if r.code != ResponseCode.SUCCESS]
    assert failed, "the failed write was acknowledged"
    assert {r.code for r in failed} == {ResponseCode.SERVICE_NOT_AVAILABLE}
    assert all(r.remark for r in failed)
    # nothing that was refused is stored: every stored record after the first was acknowledged
    acked = sum(r.code == ResponseCode.SUCCESS for r in replies)
    assert len(door.broker.store.read_queue("DefF", 0, 0, 100).records) == 1 + acked


async def test_oneway_sends_are_stored_and_never_answered(door: Door) -> None:
    for i in range(5):
        assert door.client.oneway(
            RequestCode.SEND_MESSAGE_V2, send_header("DefO", {}, queue_id=0), b"o%d" % i
        )
    probe = await door.client.request(RequestCode.SEND_MESSAGE_V2, send_header("DefO", {}, queue_id=0), b"p")
    assert probe.code == ResponseCode.SUCCESS
    assert probe.ext_fields["queueOffset"] == "5"  # the five oneway sends came first, unanswered


async def test_a_refused_send_is_answered_at_once(door: Door) -> None:
    reply = await door.client.request(RequestCode.SEND_MESSAGE_V2, send_header("DefE", {}, queue_id=0), b"")
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    bad_queue = await door.client.request(
        RequestCode.SEND_MESSAGE_V2, send_header("DefE", {}, queue_id=99), b"x"
    )
    assert bad_queue.code == ResponseCode.MESSAGE_ILLEGAL


async def test_single_sends_of_one_group_share_one_future_only_when_asked(door: Door) -> None:
    sender = door.broker.sender
    context = SendContext(born_host="127.0.0.1:1", queue_id=0)
    lean = [LeanMessage(b"s", {}, None, (), None, None)]
    first = sender.lane_append("DefS", lean, context, True)
    second = sender.lane_append("DefS", lean, context, True)
    own = sender.lane_append("DefS", lean, context)
    assert first.durable is second.durable, "one future for the group's shared waiters"
    assert own.durable is not first.durable, "an awaiting caller keeps a future of its own"
    await asyncio.gather(own.durable, asyncio.shield(first.durable))  # type: ignore[arg-type]
    after = sender.lane_append("DefS", lean, context, True)
    assert after.durable is not first.durable, "the next group has its own future"
    await asyncio.shield(after.durable)  # type: ignore[arg-type]


async def test_a_cancelled_handler_call_does_not_fail_the_sends_sharing_its_group(door: Door) -> None:
    handler = make_handler(RemotingContext(door.broker, "127.0.0.1:10911"))
    first = make_request(RequestCode.SEND_MESSAGE_V2, 1, send_header("DefC", {}, queue_id=0), b"a")
    second = make_request(RequestCode.SEND_MESSAGE_V2, 2, send_header("DefC", {}, queue_id=0), b"b")
    awaiting = asyncio.create_task(handler(first, door.client))
    await asyncio.sleep(0)  # the task appended and awaits the group, not yet written
    deferred = handler.inline(second, door.client)
    assert isinstance(deferred, Deferred)
    assert not cast("asyncio.Future[None]", deferred.durable).done()
    awaiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await awaiting
    await asyncio.shield(deferred.durable)  # type: ignore[arg-type]  # neither cancelled nor failed
    answer = deferred.finish(None)
    assert isinstance(answer, bytes) and b'"code":0,' in answer
    assert [m.body for m in door.broker.store.read_queue("DefC", 0, 0, 10).records] == [b"a", b"b"]
