"""Client sessions: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38)."""

from __future__ import annotations

from txmq.protocol.remoting.bodies import ConsumerListBody, HeartbeatData, loads_lenient
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.headers import GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting_transport import RemotingEndpoint

# The C++ client writes these enums as their ordinals (Java: ConsumeType, MessageModel).
_ENUM_NAMES: dict[str, tuple[str, ...]] = {
    "consumeType": ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"),
    "messageModel": ("BROADCASTING", "CLUSTERING"),
    "consumeFromWhere": (
        "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_FROM_TIMESTAMP",
    ),
}  # fmt: skip


def _heartbeat(body: bytes) -> HeartbeatData:
    """Parse a HEART_BEAT body, accepting the C++ client's numeric enums."""
    raw = loads_lenient(body)
    consumers = raw.get("consumerDataSet") if isinstance(raw, dict) else None
    if isinstance(consumers, list):  # anything else is refused by from_json (an int is not iterable)
        for consumer in consumers:
            if not isinstance(consumer, dict):
                continue
            for key, names in _ENUM_NAMES.items():
                value = consumer.get(key)
                if type(value) is int:
                    consumer[key] = names[value] if 0 <= value < len(names) else str(value)
    return HeartbeatData.from_json(raw)


# Java clients register an internal producer group in every heartbeat; it never sends transactions.
_INNER_PRODUCER = "CLIENT_INNER_PRODUCER"


async def heartbeat(
    ctx: RemotingContext, request: RemotingCommand, endpoint: RemotingEndpoint
) -> RemotingCommand:
    """Register producers (with this connection as their check-back channel) and consumers."""
    data = _heartbeat(request.body)
    if not data.client_id:
        return make_response(request)
    ctx.bind_client(endpoint, data.client_id)
    producers = {g for g in data.producer_groups if g and g != _INNER_PRODUCER}
    if producers:
        ctx.register_producer(endpoint, data.client_id, producers)
    for consumer in data.consumers:
        if consumer.group_name:
            subscriptions = {s.topic: s.sub_string for s in consumer.subscriptions if s.topic}
            ctx.register_consumer(data.client_id, consumer.group_name, subscriptions)
    return make_response(request)


async def unregister(ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand:
    header = UnregisterClientRequestHeader.from_command(request)
    if header.consumer_group:
        ctx.forget_client(header.client_id, consumer_group=header.consumer_group)
    else:
        ctx.forget_client(header.client_id)
    return make_response(request)


async def consumer_list(
    ctx: RemotingContext, request: RemotingCommand, _: RemotingEndpoint
) -> RemotingCommand:
    header = GetConsumerListByGroupRequestHeader.from_command(request)
    return make_response(request, body=ConsumerListBody(ctx.consumers_of(header.consumer_group)).to_json())
