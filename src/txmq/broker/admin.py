"""Operator operations as one JSON-in / JSON-out dispatcher, so every front door (the gRPC admin method,
remoting) and the CLI share exactly the same behaviour.

``await dispatch(broker, "topic.create", {"name": "orders", "queues": 8})`` returns plain JSON data or
raises a :class:`TxmqError` whose message is shown to the operator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from txmq.common import errors
from txmq.common.message import MessageView, TopicMessageType

if TYPE_CHECKING:
    from txmq.broker.broker import Broker

Handler = Callable[["Broker", dict[str, Any]], Awaitable[Any]]
_HANDLERS: dict[str, Handler] = {}


def _op(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[name] = fn
        return fn

    return register


def operations() -> list[str]:
    return sorted(_HANDLERS)


async def dispatch(broker: Broker, op: str, args: dict[str, Any]) -> Any:
    handler = _HANDLERS.get(op)
    if handler is None:
        raise errors.InvalidArgument(f"unknown admin operation {op!r}; known: {', '.join(operations())}")
    if not isinstance(args, dict):
        raise errors.InvalidArgument("admin arguments must be a JSON object")
    try:
        return await handler(broker, args)
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError) as exc:
        # an argument of the wrong JSON type or range (found by tests/fuzz): the operator gets a clear
        # InvalidArgument instead of an internal error
        raise errors.InvalidArgument(f"bad arguments for {op}: {type(exc).__name__}: {exc}") from exc


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise errors.InvalidArgument(f"argument {key!r} is required and must be a non-empty string")
    return value


def message_json(view: MessageView) -> dict[str, Any]:
    body: str
    try:
        body = view.body.decode("utf-8")
    except UnicodeDecodeError:
        body = view.body.hex()
    return {
        "message_id": view.message_id,
        "topic": view.topic,
        "queue_id": view.queue_id,
        "queue_offset": view.queue_offset,
        "commit_log_offset": view.commit_log_offset,
        "tags": view.tags,
        "keys": list(view.keys),
        "message_group": view.message_group,
        "born_ms": view.born_timestamp_ms,
        "store_ms": view.store_timestamp_ms,
        "delivery_ms": view.delivery_timestamp_ms,
        "type": view.message_type.name,
        "reconsume_times": view.reconsume_times,
        "properties": dict(view.properties),
        "body": body,
        "body_bytes": len(view.body),
    }


def _topic_json(broker: Broker, name: str) -> dict[str, Any]:
    config = broker.topics.get(name)
    if config is None:
        raise errors.TopicNotFound(f"topic {name} does not exist")
    queues = [
        {
            "queue_id": q,
            "min_offset": broker.store.min_offset(name, q),
            "max_offset": broker.store.max_offset(name, q),
        }
        for q in range(config.queues)
    ]
    return {**config.to_json(), "queue_offsets": queues}


@_op("topic.create")
async def _topic_create(broker: Broker, args: dict[str, Any]) -> Any:
    kind = str(args.get("message_type", "MIXED")).upper()
    if kind not in TopicMessageType.__members__:
        raise errors.InvalidArgument(f"message type must be one of {', '.join(TopicMessageType.__members__)}")
    queues = args.get("queues")
    config = broker.topics.create(
        _str(args, "name"),
        queues=int(queues) if queues is not None else None,
        message_type=TopicMessageType[kind],
    )
    return config.to_json()


@_op("topic.list")
async def _topic_list(broker: Broker, args: dict[str, Any]) -> Any:
    return [t.to_json() for t in broker.topics.list(include_system=bool(args.get("system", False)))]


@_op("topic.describe")
async def _topic_describe(broker: Broker, args: dict[str, Any]) -> Any:
    return _topic_json(broker, _str(args, "name"))


@_op("topic.delete")
async def _topic_delete(broker: Broker, args: dict[str, Any]) -> Any:
    broker.topics.delete(_str(args, "name"))
    return {"deleted": args["name"]}


@_op("group.list")
async def _group_list(broker: Broker, args: dict[str, Any]) -> Any:
    return [{"group": g, "inflight": broker.pop.inflight_of(g)} for g in broker.offsets.groups()]


@_op("group.describe")
async def _group_describe(broker: Broker, args: dict[str, Any]) -> Any:
    group = _str(args, "group")
    rows = []
    for (topic, queue_id), offset in sorted(broker.offsets.of_group(group).items()):
        high = broker.store.max_offset(topic, queue_id)
        # an offset past the end (corrected by the group's next pull or receive) leaves nothing to read
        lag = max(0, high - offset)
        rows.append({"topic": topic, "queue_id": queue_id, "offset": offset, "max_offset": high, "lag": lag})
    clients = [c.client_id for c in broker.clients.consumers_of(group)]
    inflight = broker.pop.inflight_of(group)
    if not (rows or clients or inflight):  # a mistyped name is an error, not an empty description
        raise errors.GroupNotFound(
            f"group {group} is not known here: no offsets, no clients, nothing in flight"
        )
    return {"group": group, "queues": rows, "inflight": inflight, "clients": clients}


@_op("group.reset_offset")
async def _group_reset(broker: Broker, args: dict[str, Any]) -> Any:
    from txmq.broker.broker import OffsetPolicy

    to = str(args.get("to", "end")).lower()
    if to not in ("beginning", "end", "timestamp"):
        raise errors.InvalidArgument("reset target must be beginning, end or timestamp")
    offsets = broker.reset_group_offset(
        _str(args, "group"), _str(args, "topic"), OffsetPolicy(to), int(args.get("timestamp_ms", 0))
    )
    return {str(q): o for q, o in offsets.items()}


@_op("query.key")
async def _query_key(broker: Broker, args: dict[str, Any]) -> Any:
    topic = args.get("topic")
    views = broker.query_by_key(
        _str(args, "key"), topic=topic if isinstance(topic, str) else None, max_count=int(args.get("max", 64))
    )
    return [message_json(v) for v in views]


@_op("query.id")
async def _query_id(broker: Broker, args: dict[str, Any]) -> Any:
    return message_json(broker.view_by_id(_str(args, "id")))


@_op("tx.list")
async def _tx_list(broker: Broker, args: dict[str, Any]) -> Any:
    limit = int(args.get("limit", 1000))
    if limit < 1:
        raise errors.InvalidArgument(f"limit must be at least 1, not {limit}")
    return broker.transactions.list_pending(limit)


@_op("tx.show")
async def _tx_show(broker: Broker, args: dict[str, Any]) -> Any:
    return broker.transactions.show(_str(args, "id"))


@_op("tx.resume")
async def _tx_resume(broker: Broker, args: dict[str, Any]) -> Any:
    await broker.transactions.resume(_str(args, "id"))
    return broker.transactions.show(_str(args, "id"))


@_op("tx.resolve")
async def _tx_resolve(broker: Broker, args: dict[str, Any]) -> Any:
    commit = args.get("commit")
    if not isinstance(commit, bool):
        raise errors.InvalidArgument("resolve needs commit: true or false")
    await broker.transactions.resolve(_str(args, "id"), commit)
    return broker.transactions.show(_str(args, "id"))


@_op("broker.status")
async def _status(broker: Broker, args: dict[str, Any]) -> Any:
    store = broker.store
    return {
        "broker_name": broker.config.broker_name,
        "flush": broker.config.flush.value,
        "max_physical_offset": store.max_physical_offset,
        "flushed_offset": store.flushed_offset,
        "fenced": store.fenced,
        "fence_reason": store.fence_reason,
        "clients": len(broker.clients.all()),
        "transactions_checks_sent": broker.transactions.checks_sent,
        "transactions_discarded": broker.transactions.discarded,
        "delayed_delivered": broker.delays.delivered,
    }
