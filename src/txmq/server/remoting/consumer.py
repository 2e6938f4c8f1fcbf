"""Consumer requests: PULL_MESSAGE (11, long polling), offsets (14, 15, 29, 30, 31), retries (36),
orderly locks (41, 42)."""

from __future__ import annotations

from txmq.broker import retry
from txmq.broker.broker import OffsetPolicy, RawPullResult
from txmq.broker.records import to_view
from txmq.common import errors, limits
from txmq.protocol.remoting.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueueData
from txmq.protocol.remoting.codes import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
    parse_pull_header,
)
from txmq.protocol.remoting.message_codec import encode_message
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.convert import PullSink, to_wire
from txmq.server.remoting_transport import RemotingEndpoint
from txmq.storage.api import ReadStatus


def _expression(ctx: RemotingContext, header: PullMessageRequestHeader) -> str | None:
    if header.expression_type not in (None, "", "TAG"):
        raise errors.InvalidFilter(f"expression type {header.expression_type} is not supported; use TAG")
    if header.sys_flag & PULL_SUBSCRIPTION and header.subscription:
        return header.subscription
    return ctx.subscription_of(header.consumer_group, header.topic)


async def pull(ctx: RemotingContext, request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand:
    """Read a queue from an offset; with the suspend flag, wait for arrivals up to suspendTimeoutMillis."""
    header = parse_pull_header(request)
    broker = ctx.broker
    if header.sys_flag & PULL_COMMIT_OFFSET and header.commit_offset >= 0:
        broker.update_offset(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
    long_poll = header.suspend_timeout_millis if header.sys_flag & PULL_SUSPEND else 0
    batch_size = max(1, min(header.max_msg_nums, limits.pull_batch_max))
    topic = header.topic

    def general(physical_offset: int) -> bytes:
        return encode_message(to_wire(to_view(broker.store.read(physical_offset)), topic=topic))

    # fused: the commit log's records go straight into the wire body (no per-record tuples)
    sink = PullSink(topic, general)
    result = await broker.pull_into(
        sink, group=header.consumer_group, topic=topic, queue_id=header.queue_id, offset=header.queue_offset,
        batch_size=batch_size, expression=_expression(ctx, header),
        long_poll_ms=max(0, min(long_poll, limits.long_polling_ms_max)),
        max_bytes=min(header.max_msg_bytes or limits.pull_bytes_max, limits.pull_bytes_max),
    )  # fmt: skip
    code = _pull_code(result, sink.count > 0, header.queue_offset)
    response_header = PullMessageResponseHeader(
        suggest_which_broker_id=0, next_begin_offset=result.next_offset, min_offset=result.min_offset,
        max_offset=result.max_offset,
    )  # fmt: skip
    body = sink.body() if code == ResponseCode.SUCCESS else b""
    return make_response(request, code, ext_fields=response_header.to_ext_fields(), body=body)


def _pull_code(result: RawPullResult, found: bool, offset: int) -> ResponseCode:
    if found:
        return ResponseCode.SUCCESS
    status = result.status
    if status is ReadStatus.NO_NEW_MESSAGE:
        # everything read was filtered out: ask again from next_offset at once
        return (
            ResponseCode.PULL_RETRY_IMMEDIATELY
            if result.next_offset > offset
            else ResponseCode.PULL_NOT_FOUND
        )
    if status is ReadStatus.OFFSET_OVERFLOW and offset == result.max_offset + 1:
        return ResponseCode.PULL_NOT_FOUND
    if status is ReadStatus.NO_QUEUE and offset == 0:
        return ResponseCode.PULL_NOT_FOUND
    if status in (ReadStatus.OFFSET_TOO_SMALL, ReadStatus.OFFSET_OVERFLOW, ReadStatus.NO_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED
    return ResponseCode.PULL_NOT_FOUND


async def query_offset(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    header = QueryConsumerOffsetRequestHeader.from_command(request)
    offset = ctx.broker.get_offset(header.consumer_group, header.topic, header.queue_id)
    if offset is None and header.set_zero_if_not_found is not False:
        # as RocketMQ: a young queue is read from 0 by a new group (4.x clients send no setZeroIfNotFound)
        offset = ctx.broker.new_group_offset(header.topic, header.queue_id)
    if offset is None:
        return make_response(request, ResponseCode.QUERY_NOT_FOUND, "the group has no offset for this queue")
    return make_response(request, ext_fields=QueryConsumerOffsetResponseHeader(offset).to_ext_fields())


async def update_offset(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    header = UpdateConsumerOffsetRequestHeader.from_command(request)
    ctx.broker.update_offset(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
    return make_response(request)


async def search_offset(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    header = SearchOffsetRequestHeader.from_command(request)
    offset = ctx.broker.query_offset(header.topic, header.queue_id, OffsetPolicy.TIMESTAMP, header.timestamp)
    return make_response(request, ext_fields=SearchOffsetResponseHeader(offset).to_ext_fields())


async def max_offset(ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand:
    header = GetMaxOffsetRequestHeader.from_command(request)
    offset = ctx.broker.query_offset(header.topic, header.queue_id, OffsetPolicy.END)
    return make_response(request, ext_fields=GetMaxOffsetResponseHeader(offset).to_ext_fields())


async def min_offset(ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand:
    header = GetMinOffsetRequestHeader.from_command(request)
    offset = ctx.broker.query_offset(header.topic, header.queue_id, OffsetPolicy.BEGINNING)
    return make_response(request, ext_fields=GetMinOffsetResponseHeader(offset).to_ext_fields())


async def send_back(ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand:
    """A consumer failed a message: it comes back later through %RETRY%<group> (or goes to the DLQ)."""
    header = ConsumerSendMsgBackRequestHeader.from_command(request)
    await retry.send_back(
        ctx.broker, header.group, header.offset, header.delay_level, header.max_reconsume_times
    )
    return make_response(request)


def _queues(body: LockBatchRequestBody) -> list[tuple[str, int]]:
    return [(mq.topic, mq.queue_id) for mq in body.mq_set]


async def lock_batch(ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand:
    body = LockBatchRequestBody.from_json(request.body)
    held = ctx.locks.try_lock(body.consumer_group, body.client_id, _queues(body))
    name = ctx.broker.config.broker_name
    locked = [MessageQueueData(topic, name, queue_id) for topic, queue_id in held]
    return make_response(request, body=LockBatchResponseBody(locked).to_json())


async def unlock_batch(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    body = LockBatchRequestBody.from_json(request.body)
    ctx.locks.unlock(body.consumer_group, body.client_id, _queues(body))
    return make_response(request)
