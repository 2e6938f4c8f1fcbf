"""Request code -> handler, and the handler the transport runs for every request of a broker connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final

from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.server.remoting import admin, consumer, producer, session
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.status import error_response
from txmq.server.remoting_transport import Deferred, InlineResult, RemotingEndpoint

Route = Callable[[RemotingContext, RemotingCommand, RemotingEndpoint], Awaitable[RemotingCommand | None]]
# a route called inline, from the transport's read callback: it answers now, defers its answer to a
# future (``Deferred``), or hands back a coroutine the transport runs as a task
InlineRoute = Callable[[RemotingContext, RemotingCommand, RemotingEndpoint], InlineResult]

INLINE_ROUTES: Final[dict[int, InlineRoute]] = {  # Final: a C static to compiled code
    RequestCode.SEND_MESSAGE: producer.send,
    RequestCode.SEND_MESSAGE_V2: producer.send,
    RequestCode.SEND_BATCH_MESSAGE: producer.send,
    RequestCode.END_TRANSACTION: producer.end_transaction,
}

ROUTES: dict[int, Route] = {
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


class BrokerHandler:
    """The per-request handler of a broker connection; ``fallback`` serves other codes (the name server).

    The transport calls :meth:`inline` for every request (from its read callback); awaiting the
    handler itself (``await handler(request, endpoint)``) gives the same answer for any request."""

    def __init__(self, ctx: RemotingContext, fallback: Fallback | None = None) -> None:
        self._ctx = ctx
        self._fallback = fallback

    def inline(self, request: RemotingCommand, endpoint: RemotingEndpoint) -> InlineResult:
        route = INLINE_ROUTES.get(request.code)
        if route is None:
            return self._routed(request, endpoint)
        try:
            result = route(self._ctx, request, endpoint)
        except Exception as exc:  # noqa: BLE001 - mapped to a response code in one place
            return None if request.is_oneway else error_response(request, exc)
        if result is None or type(result) is Deferred or type(result) is RemotingCommand:
            return result  # the usual answers, none a coroutine: no ABC isinstance (~1.5k instructions)
        if isinstance(result, Coroutine):
            return self._guarded(request, result)
        return result

    async def __call__(self, request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        result = self.inline(request, endpoint)
        if result is None or isinstance(result, RemotingCommand):
            return result
        if isinstance(result, Deferred):
            try:
                # shielded: the future may be shared by a group's appends (``lane_append(shared=True)``),
                # so cancelling this caller must not cancel it
                durable = result.durable
                await (asyncio.shield(durable) if isinstance(durable, asyncio.Future) else durable)
            except Exception as exc:  # noqa: BLE001 - the deferred answer maps it
                deferred = result.finish(exc)
            else:
                deferred = result.finish(None)
            return frame.decode(deferred) if isinstance(deferred, bytes) else deferred
        answer: RemotingCommand | None = await result
        return answer

    @staticmethod
    async def _guarded(
        request: RemotingCommand, pending: Coroutine[Any, Any, RemotingCommand | None]
    ) -> RemotingCommand | None:
        try:
            return await pending
        except Exception as exc:  # noqa: BLE001 - mapped to a response code in one place
            return None if request.is_oneway else error_response(request, exc)

    async def _routed(self, request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand | None:
        route = ROUTES.get(request.code)
        if route is None:
            if self._fallback is not None:
                return await self._fallback(request, endpoint)
            return make_response(
                request,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"request code {request.code} is not supported",
            )
        try:
            return await route(self._ctx, request, endpoint)
        except Exception as exc:  # noqa: BLE001 - mapped to a response code in one place
            return None if request.is_oneway else error_response(request, exc)


def make_handler(ctx: RemotingContext, fallback: Fallback | None = None) -> BrokerHandler:
    """The per-request handler of a broker connection; ``fallback`` serves other codes (the name server)."""
    return BrokerHandler(ctx, fallback)
