"""Request code -> handler, and the handler the transport runs for every request of a broker connection."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.server.remoting import admin, consumer, producer, session
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.status import error_response
from txmq.server.remoting_transport import Handler, RemotingEndpoint

Route = Callable[[RemotingContext, RemotingCommand, RemotingEndpoint], Awaitable[RemotingCommand | None]]

ROUTES: dict[int, Route] = {
    RequestCode.SEND_MESSAGE: producer.send,
    RequestCode.SEND_MESSAGE_V2: producer.send,
    RequestCode.SEND_BATCH_MESSAGE: producer.send,
    RequestCode.END_TRANSACTION: producer.end_transaction,
    RequestCode.HEART_BEAT: session.heartbeat,
    RequestCode.UNREGISTER_CLIENT: session.unregister,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: session.consumer_list,
    RequestCode.PULL_MESSAGE: consumer.pull,
    RequestCode.QUERY_CONSUMER_OFFSET: consumer.query_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: consumer.update_offset,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: consumer.search_offset,
    RequestCode.GET_MAX_OFFSET: consumer.max_offset,
    RequestCode.GET_MIN_OFFSET: consumer.min_offset,
    RequestCode.CONSUMER_SEND_MSG_BACK: consumer.send_back,
    RequestCode.LOCK_BATCH_MQ: consumer.lock_batch,
    RequestCode.UNLOCK_BATCH_MQ: consumer.unlock_batch,
    RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
    RequestCode.GET_ALL_TOPIC_CONFIG: admin.all_topics,
    RequestCode.QUERY_MESSAGE: admin.query_message,
    RequestCode.VIEW_MESSAGE_BY_ID: admin.view_message,
}

Fallback = Callable[[RemotingCommand, RemotingEndpoint], Awaitable[RemotingCommand | None]]


def make_handler(ctx: RemotingContext, fallback: Fallback | None = None) -> Handler:
    """The per-request handler of a broker connection; ``fallback`` serves other codes (the name server)."""

    async def handle(request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        route = ROUTES.get(request.code)
        if route is None:
            if fallback is not None:
                return await fallback(request, endpoint)
            return make_response(
                request,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"request code {request.code} is not supported",
            )
        try:
            return await route(ctx, request, endpoint)
        except Exception as exc:  # noqa: BLE001 - mapped to a response code in one place
            return None if request.is_oneway else error_response(request, exc)

    return handle
