"""Admin requests: UPDATE_AND_CREATE_TOPIC (17), GET_ALL_TOPIC_CONFIG (21), QUERY_MESSAGE (12, by key),
VIEW_MESSAGE_BY_ID (33)."""

from __future__ import annotations

from txmq.broker.records import to_view
from txmq.broker.topics import TopicConfig
from txmq.common import names
from txmq.protocol.remoting.bodies import TopicConfigData, TopicConfigWrapper
from txmq.protocol.remoting.codes import ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.headers import (
    CreateTopicRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from txmq.protocol.remoting.message_codec import encode_message
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.convert import to_wire
from txmq.server.remoting_transport import RemotingEndpoint


async def create_topic(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    header = CreateTopicRequestHeader.from_command(request)
    names.validate_topic(header.topic)
    queues = max(header.read_queue_nums, header.write_queue_nums, 1)
    ctx.broker.topics.create(header.topic, queues=queues, perm=header.perm or 6)
    return make_response(request)


def topic_table(configs: list[TopicConfig], *, default_queues: int) -> TopicConfigWrapper:
    """Every user topic, plus TBW102 so clients can fall back to it for topics created on first send."""
    table = {t.name: TopicConfigData(t.name, t.queues, t.queues, int(t.perm)) for t in configs}
    table.setdefault(
        names.DEFAULT_TOPIC, TopicConfigData(names.DEFAULT_TOPIC, default_queues, default_queues)
    )
    return TopicConfigWrapper(table)


async def all_topics(ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand:
    wrapper = topic_table(ctx.broker.topics.list(), default_queues=ctx.broker.config.default_queues)
    return make_response(request, body=wrapper.to_json())


async def query_message(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    header = QueryMessageRequestHeader.from_command(request)
    views = ctx.broker.query_by_key(header.key, topic=header.topic, max_count=max(1, min(header.max_num, 64)))
    views = [
        v for v in views if header.begin_timestamp <= v.store_timestamp_ms <= (header.end_timestamp or 2**62)
    ]
    response_header = QueryMessageResponseHeader(ctx.broker.clock.now_ms(), 0).to_ext_fields()
    if not views:
        return make_response(
            request, ResponseCode.QUERY_NOT_FOUND, "no message with this key", response_header
        )
    body = b"".join(encode_message(to_wire(v)) for v in views)
    return make_response(request, ext_fields=response_header, body=body)


async def view_message(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    header = ViewMessageRequestHeader.from_command(request)
    view = to_view(ctx.broker.store.read(header.offset))
    return make_response(request, body=encode_message(to_wire(view)))
