"""The RocketMQ 5 gRPC front door: ``apache.rocketmq.v2.MessagingService`` on grpc.aio.

One thin method per RPC: wire request -> :class:`Broker` call -> wire response. No business rules live
here; failures become a v2 ``Status`` in :mod:`txmq.protocol.grpc.status` only. The operator door
(``/txmq.Admin/Call``) is served on the same port.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from txmq.broker.broker import Broker, OffsetPolicy
from txmq.broker.receipt import decode_receipt
from txmq.broker.send import SendContext
from txmq.broker.topics import TopicConfig
from txmq.common import errors, limits, names
from txmq.common.message import Message, MessageView
from txmq.common.ports import is_wildcard_host
from txmq.protocol.grpc import checks, convert, pb, routes, wire
from txmq.protocol.grpc.status import status_of
from txmq.server import grpc_telemetry
from txmq.server.admin_grpc import admin_handler
from txmq.server.grpc_decode import Malformed, messaging_handler, parse_send
from txmq.storage.api import ReadStatus

log = logging.getLogger(__name__)
CLIENT_ID_HEADER = "x-mq-client-id"
DEFAULT_BATCH_SIZE = 32
LOOPBACK_HOST = "127.0.0.1"
DEADLINE_MARGIN_MS = 500  # answer a long poll this long before the client's deadline
S = pb.service
_NOT_FOUND = convert.status(errors.MESSAGE_NOT_FOUND, "no new message")
_OFFSET_POLICIES = {
    pb.QueryOffsetPolicy.BEGINNING: OffsetPolicy.BEGINNING,
    pb.QueryOffsetPolicy.END: OffsetPolicy.END,
    pb.QueryOffsetPolicy.TIMESTAMP: OffsetPolicy.TIMESTAMP,
}
_RESOLUTIONS = {pb.TransactionResolution.COMMIT: True, pb.TransactionResolution.ROLLBACK: False}

Handler = Callable[[Any, Any, Any], Awaitable[Any]]
# born hosts whose SendContext the door keeps: building one (a frozen dataclass: its generated __init__
# sets each field through object.__setattr__) costs ~6k instructions, a look-up ~0.3k
_CONTEXTS_MAX = 1024


def _load_sendscan() -> Any:
    """The C scan of a plain SendMessageRequest (``protocol/grpc/_sendscan.c``, built beside the mypyc
    modules) or None: not built, or ``TXMQ_PURE=1``. Without it every request takes ``wire.send_lane``,
    ``checks.check_lean`` and the send lane's Python path, the reference it is held to
    (``tests/property/test_grpc_send_scan.py``)."""
    try:
        return importlib.import_module("txmq.protocol.grpc._sendscan")
    except ImportError:
        return None


_SENDSCAN: Any = _load_sendscan()
# a SendMessageResponse's status field (1) holding OK, as wire.lane_reply starts the reply and each entry
_OK_STATUS = convert.OK_STATUS.SerializeToString()
_OK_FIELD = b"\x0a" + wire.varint(len(_OK_STATUS)) + _OK_STATUS
_SCAN_LIMITS = (
    limits.body_bytes_max, limits.tag_bytes_max, limits.keys_count_max, limits.key_bytes_max,
    limits.property_count_max, limits.properties_bytes_max,
)  # fmt: skip


def _unary(response: Any) -> Callable[[Handler], Handler]:
    """Turn any exception of a unary handler into ``response(status=...)``."""

    def wrap(fn: Handler) -> Handler:
        @functools.wraps(fn)
        async def call(self: Any, request: Any, context: Any) -> Any:
            try:
                return await fn(self, request, context)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
                return response(status=status_of(exc))

        return call

    return wrap


def client_id_of(context: Any, *, required: bool = True) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_HEADER:
            return str(value)
    if required:
        raise errors.ClientIdRequired(f"the {CLIENT_ID_HEADER} metadata header is missing")
    return ""


def _peer_host(context: Any) -> str:
    peer = str(context.peer() or "")  # "ipv4:127.0.0.1:5555" / "ipv6:[::1]:5555" / "unix:/path"
    kind, _, rest = peer.partition(":")
    if kind == "unix":  # relayed by a GrpcFront: the client's address is not known here
        return LOOPBACK_HOST
    return rest.rpartition(":")[0].strip("[]")


def _long_poll_ms(request: Any, context: Any) -> int:
    wanted = (
        convert.duration_ms(request.long_polling_timeout) if request.HasField("long_polling_timeout") else 0
    )
    remaining = context.time_remaining()
    if remaining is not None:
        wanted = min(wanted, int(remaining * 1000) - DEADLINE_MARGIN_MS)
    return max(0, min(wanted, limits.long_polling_ms_max))


def _expression(filter_expression: Any) -> str:
    if filter_expression.type == pb.FilterType.SQL:
        raise errors.Unsupported("SQL92 filter expressions are not supported; use a tag expression (a || b)")
    return str(filter_expression.expression or "*")


def _client_topic(name: str) -> str:
    """A topic a RocketMQ 5 client may route, be assigned or pull from: as the Apache proxy, never a
    system topic (RMQ_SYS_TRANS_HALF_TOPIC would hand out uncommitted transactional messages)."""
    if names.is_system_topic(name):
        raise errors.InvalidTopic(f"cannot access system topic {name}")
    return name


def _client_group(name: str) -> str:
    """A consumer group a RocketMQ 5 client may receive, ack or be assigned with: as the Apache proxy,
    never a system group (``CID_RMQ_SYS_...``, ILLEGAL_CONSUMER_GROUP)."""
    if names.is_system_group(name):
        raise errors.InvalidGroup(f"cannot use system consumer group {name}")
    return name


def _handle_of_topic(handle: str, topic: str, group: str) -> None:
    """INVALID_RECEIPT_HANDLE when ``handle`` was not issued for ``topic`` (or for ``group``'s retry
    topic, whose messages are delivered under their original topic). The Apache proxy would ack the
    named topic's queue and offset instead, answer OK and let the message come again: a client
    naming the wrong topic learns it here."""
    leased = decode_receipt(handle).topic
    if leased != topic and leased != names.retry_topic(group):
        raise errors.InvalidReceiptHandle(f"the receipt handle is for topic {leased}, not {topic}")


def _topic_route(config: TopicConfig) -> routes.TopicRoute:
    return routes.TopicRoute(
        config.name, config.queues, config.message_type.accepted(), config.readable, config.writable
    )


class MessagingServicer:
    """apache.rocketmq.v2.MessagingService, translated onto a :class:`Broker`.

    ReceiveMessage pops from every queue of the topic whatever queue the request names, as the Apache
    proxy does: the Python SimpleConsumer names a randomly chosen queue per call and would otherwise
    long-poll empty queues while others hold messages. FIFO order needs no queue pinning: a message
    group lives in one queue and the broker hands out its next message only after the previous one.
    """

    def __init__(self, broker: Broker, advertised_host: str, advertised_port: int) -> None:
        self.broker = broker
        self.endpoints = routes.endpoints(advertised_host, advertised_port)
        self._contexts: dict[str, SendContext] = {}  # born host -> its send context (immutable)

    def _context(self, born_host: str) -> SendContext:
        """The :class:`SendContext` of a request from ``born_host``, built once per host (at most
        ``_CONTEXTS_MAX`` kept: past that the door starts over)."""
        ctx = self._contexts.get(born_host)
        if ctx is None:
            if len(self._contexts) >= _CONTEXTS_MAX:
                self._contexts.clear()
            ctx = self._contexts[born_host] = SendContext(born_host=born_host)
        return ctx

    def _where(self, requested: Any) -> Any:
        """The endpoints a client should use: the ones it used to reach us, else our advertised ones."""
        return requested if requested.addresses else self.endpoints

    # ---- routes and clients ------------------------------------------------------------------
    @_unary(S.QueryRouteResponse)
    async def QueryRoute(self, request: Any, context: Any) -> Any:
        topic = _topic_route(self.broker.route(_client_topic(request.topic.name)))
        queues = routes.route(topic, self.broker.config.broker_name, self._where(request.endpoints))
        return S.QueryRouteResponse(status=convert.OK_STATUS, message_queues=queues)

    @_unary(S.HeartbeatResponse)
    async def Heartbeat(self, request: Any, context: Any) -> Any:
        group = {request.group.name} if request.HasField("group") and request.group.name else None
        kind = grpc_telemetry.client_kind(request.client_type)
        self.broker.clients.touch(client_id_of(context), kind=kind, groups=group, protocol="grpc")
        return S.HeartbeatResponse(status=convert.OK_STATUS)

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        try:
            client_id = client_id_of(context)
        except errors.TxmqError as exc:
            yield S.TelemetryCommand(status=status_of(exc))
            return
        channel = grpc_telemetry.TelemetryChannel()
        reader = asyncio.ensure_future(
            grpc_telemetry.read_commands(self.broker, client_id, channel, request_iterator)
        )
        try:
            async for command in channel.commands():
                yield command
        finally:
            channel.close()
            reader.cancel()
            self.broker.clients.detach_channel(client_id, channel)

    @_unary(S.NotifyClientTerminationResponse)
    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        self.broker.clients.remove(client_id_of(context))
        return S.NotifyClientTerminationResponse(status=convert.OK_STATUS)

    @_unary(S.QueryAssignmentResponse)
    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        topic = _topic_route(self.broker.route(_client_topic(request.topic.name)))
        queues = self.broker.query_assignment(request.topic.name, _client_group(request.group.name))
        found = routes.assignments(topic, queues, self._where(request.endpoints))
        return S.QueryAssignmentResponse(status=convert.OK_STATUS, assignments=found)

    # ---- producing ---------------------------------------------------------------------------
    async def SendMessage(self, request: Any, context: Any) -> Any:
        """``request``: its bytes (grpc_decode.RAW_REQUEST) or a parsed SendMessageRequest.

        The common request (``wire.send_lane``) is served here in one coroutine: no wrapper, no
        nested coroutines, no look at the call's metadata (a send needs no client id). Every failure
        becomes a v2 status, as :func:`_unary` words it."""
        if _SENDSCAN is not None and request.__class__ is bytes:
            try:
                started = self._send_scanned(request, context)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
                return S.SendMessageResponse(status=status_of(exc))
            if started.__class__ is tuple:  # appended: answered once durable
                message_ids, queue_offsets, durable = started
                try:
                    await durable
                    reply = _SENDSCAN.lane_reply(_OK_FIELD, message_ids, queue_offsets)
                    return wire.lane_reply(message_ids, queue_offsets) if reply is None else reply
                except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
                    return _send_failed(exc, message_ids)
            if started is not None:
                return started  # the append failed: its v2 status
        try:
            decoded = wire.send_lane(request) if request.__class__ is bytes else None
            if decoded is None:
                return await self._send_general(request, context)
            topic, lean, born_host = decoded
            host = born_host or _peer_host(context)
            ctx = self._contexts.get(host) or self._context(host)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
            return S.SendMessageResponse(status=status_of(exc))
        try:
            lean = checks.check_lean(lean)
            if len(lean) > 1:  # answered from the batch's columns: no SendResult per message
                sent = await self.broker.send_lean_batch(topic, lean, ctx)
                return wire.lane_reply(sent.message_ids, sent.queue_offsets)
            # one message (the pipelined producer's request): appended here and answered from the
            # append's columns once durable, what send_lean answers without its two coroutines and
            # a SendResult (whose offset message id this reply does not carry)
            appended = self.broker.sender.lane_append(topic, lean, ctx)
            await appended.durable
            return wire.lane_reply(appended.message_ids, appended.appended.queue_offsets)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
            return _send_failed(exc, [m.message_id or "" for m in lean])

    def _send_scanned(self, request: bytes, context: Any) -> Any:
        """A plain request (NORMAL messages without user properties, ASCII fields: what the official
        clients send) read by one C call into the send lane's columns and appended at once:
        (message ids, queue offsets, durable) to answer once ``durable`` completes, the failure's
        SendMessageResponse when the append raised, or None, having changed nothing, for anything the
        scan or the lane declines (the caller then takes ``wire.send_lane``, which judges it and
        gives its errors). The same records and answer as that path
        (``tests/property/test_grpc_send_scan.py``)."""
        sender = self.broker.sender
        tail = sender.lane_tail(None)  # the door's contexts carry no producer group
        if tail is None:
            return None  # pragma: no cover - no group: the tail is the message type's pair
        scan = _SENDSCAN.send_scan(request, tail, *_SCAN_LIMITS)
        if scan is None:
            return None
        topic, born_host, columns = scan
        host = born_host or _peer_host(context)
        ctx = self._contexts.get(host) or self._context(host)
        message_ids: list[str] = columns[4]
        try:
            if len(message_ids) > 1:
                started = sender.lane_columns(topic, columns, ctx, False)
                if started is None:
                    return None
                sent, durable = started
                return (message_ids, sent.queue_offsets, durable)
            appended = sender.lane_one(topic, columns, ctx)
            if appended is None:
                return None
            return (message_ids, appended.appended.queue_offsets, appended.durable)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
            return _send_failed(exc, message_ids)

    @_unary(S.SendMessageResponse)
    async def _send_general(self, request: Any, context: Any) -> Any:
        """Anything ``wire.send_lane`` declines: protobuf's parse (or BAD_REQUEST), then the send
        lane when every message suits it, else the general path."""
        if request.__class__ is bytes:
            request = parse_send(request)  # as before (or BAD_REQUEST)
            if isinstance(request, Malformed):
                raise errors.InvalidArgument(request.reason)
        if not request.messages:
            raise errors.InvalidArgument("a send request must carry at least one message")
        ctx = self._context(request.messages[0].system_properties.born_host or _peer_host(context))
        messages: list[Message] = []
        try:
            for m in request.messages:
                sysp = m.system_properties
                checks.check_fields(
                    sysp.tag, sysp.keys, sysp.message_group, m.user_properties, sysp.message_id
                )
                if sysp.keys and (split := checks.split_keys(sysp.keys)) is not None:
                    del sysp.keys[:]  # stored as the proxy stores them: "a b" is the keys a and b
                    sysp.keys.extend(split)
            lane = convert.to_lean(request.messages)
            if lane is not None:
                topic, lean = lane
                if len(lean) > 1:
                    sent = await self.broker.send_lean_batch(topic, lean, ctx)
                    return wire.lane_reply(sent.message_ids, sent.queue_offsets)
                return wire.send_reply(await self.broker.send_lean(topic, lean, ctx))
            messages = [convert.to_message(m) for m in request.messages]
            results = await self.broker.send(messages, ctx)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
            return _send_failed(exc, [m.system_properties.message_id for m in request.messages])
        # the serialized reply, written directly (wire.py): a SendResultEntry per message filled
        # through protobuf costs ~4x more; grpc_decode's serializer passes bytes through
        return wire.send_reply(results)

    @_unary(S.EndTransactionResponse)
    async def EndTransaction(self, request: Any, context: Any) -> Any:
        await self.broker.end_transaction(
            topic=request.topic.name,
            message_id=request.message_id,
            transaction_id=request.transaction_id,
            commit=_RESOLUTIONS.get(request.resolution),
            from_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            client_id=client_id_of(context, required=False),
        )
        return S.EndTransactionResponse(status=convert.OK_STATUS)

    @_unary(S.RecallMessageResponse)
    async def RecallMessage(self, request: Any, context: Any) -> Any:
        message_id = await self.broker.recall(request.topic.name, request.recall_handle)
        return S.RecallMessageResponse(status=convert.OK_STATUS, message_id=message_id)

    # ---- POP consumption ---------------------------------------------------------------------
    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        response = S.ReceiveMessageResponse
        config = self.broker.config
        try:
            renewer = None
            if request.auto_renew:
                # as the Apache proxy (enableProxyAutoRenew): the broker's lease, whatever was asked
                # (the official PushConsumer asks none), renewed while the client lives (renew_for)
                invisible_ms = config.invisible_ms_auto_renew
                renewer = client_id_of(context, required=False) or None
            else:  # absent: 0, refused as too small (the proxy's GrpcValidator)
                invisible_ms = convert.duration_ms(request.invisible_duration)
            chunks = self.broker.receive_chunks(
                group=_client_group(request.group.name),
                topic=_client_topic(request.message_queue.topic.name),
                expression=_expression(request.filter_expression),
                # the proxy lowers a larger batch size to 32 (ConsumerProcessor.popMessage)
                batch_size=min(request.batch_size or DEFAULT_BATCH_SIZE, config.grpc_receive_batch_max),
                invisible_ms=invisible_ms,
                long_poll_ms=_long_poll_ms(request, context),
                queue_id=None,  # like the proxy: pop from every queue (see the class docstring)
            )
            messages = await anext(chunks, None)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
            yield response(status=status_of(exc))
            return
        if not messages:
            yield response(status=_NOT_FOUND)
        else:
            yield response(status=convert.OK_STATUS)
            delivered = wire.delivered
            try:
                while messages:
                    # a chunk's responses are all built before the first is written: one tight
                    # conversion loop costs less than conversions interleaved with grpc's writes, and
                    # other calls run between the chunks (receive_chunks). Each response is written as
                    # bytes (wire.delivered: what convert.to_wire + SerializeToString give, cheaper),
                    # which grpc_decode's serializer passes through.
                    if renewer is not None:
                        self.broker.renew_for(request.group.name, renewer, messages)
                    responses = [delivered(view, invisible_ms) for view in messages]
                    for encoded in responses:
                        yield encoded
                    messages = await _next_chunk(chunks)
            finally:
                await chunks.aclose()  # a client gone mid-stream: lease nothing more
        last = response()
        convert.set_timestamp(last.delivery_timestamp, self.broker.clock.now_ms())
        yield last

    @_unary(S.AckMessageResponse)
    async def AckMessage(self, request: Any, context: Any) -> Any:
        group = _client_group(request.group.name)
        topic = request.topic.name
        names.validate_topic(_client_topic(topic))  # the proxy's ILLEGAL_TOPIC, for the whole request
        check = self._check_handle
        reply = S.AckMessageResponse()
        add = reply.entries.add  # filled in place: a receive loop acks every message it got
        ack = self.broker.ack
        ok = convert.OK_STATUS
        first_failure = None
        for entry in request.entries:
            handle = entry.receipt_handle
            try:
                check(handle, topic, group)
                ack(group=group, receipt_handle=handle)
                result_status = ok
            except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
                result_status = status_of(exc)
                first_failure = first_failure or result_status
            add(message_id=entry.message_id, receipt_handle=handle, status=result_status)
        reply.status.CopyFrom(first_failure or ok)
        return reply

    @_unary(S.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        group = _client_group(request.group.name)
        topic = request.topic.name
        names.validate_topic(_client_topic(topic))
        self._check_handle(request.receipt_handle, topic, group)
        handle = self.broker.change_invisible(
            group=group,
            receipt_handle=request.receipt_handle,
            invisible_ms=convert.duration_ms(request.invisible_duration),
        )
        return S.ChangeInvisibleDurationResponse(status=convert.OK_STATUS, receipt_handle=handle)

    @_unary(S.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        await self.broker.forward_to_dlq(
            group=_client_group(request.group.name), receipt_handle=request.receipt_handle
        )
        return S.ForwardMessageToDeadLetterQueueResponse(status=convert.OK_STATUS)

    @_unary(S.SyncLiteSubscriptionResponse)
    async def SyncLiteSubscription(self, request: Any, context: Any) -> Any:
        raise errors.Unsupported("lite topics are not supported")

    def _check_handle(self, handle: str, topic: str, group: str) -> None:
        """The topic an ack or change of invisible time names (a valid name, see AckMessage) exists
        (TOPIC_NOT_FOUND, as the Apache broker's TOPIC_NOT_EXIST; never created by an ack) and is the
        handle's (:func:`_handle_of_topic`)."""
        if self.broker.topics.get(topic) is None:
            raise errors.TopicNotFound(f"topic {topic} does not exist")
        _handle_of_topic(handle, topic, group)

    # ---- offset-based pull -------------------------------------------------------------------
    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        response = S.PullMessageResponse
        try:
            result = await self.broker.pull(
                group=request.group.name or None,
                topic=_client_topic(request.message_queue.topic.name),
                queue_id=request.message_queue.id,
                offset=request.offset,
                batch_size=request.batch_size or DEFAULT_BATCH_SIZE,
                expression=_expression(request.filter_expression),
                long_poll_ms=_long_poll_ms(request, context),
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
            yield response(status=status_of(exc))
            return
        yield response(status=_pull_status(result.status, result.min_offset, result.max_offset))
        for view in result.messages:
            yield wire.delivered(view, None)  # the delivered message's response, serialized
        yield response(next_offset=result.next_offset)

    @_unary(S.GetOffsetResponse)
    async def GetOffset(self, request: Any, context: Any) -> Any:
        queue = request.message_queue
        offset = self.broker.get_offset(request.group.name, queue.topic.name, queue.id)
        if offset is None:
            raise errors.OffsetNotFound(
                f"group {request.group.name} has no offset for {queue.topic.name}:{queue.id}"
            )
        return S.GetOffsetResponse(status=convert.OK_STATUS, offset=offset)

    @_unary(S.UpdateOffsetResponse)
    async def UpdateOffset(self, request: Any, context: Any) -> Any:
        queue = request.message_queue
        self.broker.update_offset(request.group.name, queue.topic.name, queue.id, request.offset)
        return S.UpdateOffsetResponse(status=convert.OK_STATUS)

    @_unary(S.QueryOffsetResponse)
    async def QueryOffset(self, request: Any, context: Any) -> Any:
        queue = request.message_queue
        policy = _OFFSET_POLICIES.get(request.query_offset_policy)
        if policy is None:
            raise errors.InvalidArgument(f"unknown query offset policy {request.query_offset_policy}")
        if policy is OffsetPolicy.TIMESTAMP and not request.HasField("timestamp"):
            raise errors.InvalidArgument("a TIMESTAMP offset query needs a timestamp")
        at_ms = convert.timestamp_ms(request.timestamp) if request.HasField("timestamp") else 0
        offset = self.broker.query_offset(queue.topic.name, queue.id, policy, at_ms)
        return S.QueryOffsetResponse(status=convert.OK_STATUS, offset=offset)


def _send_failed(exc: Exception, message_ids: list[str]) -> Any:
    """A failed send's reply: the failure, and one entry carrying it per message."""
    failed = status_of(exc)
    entries = [S.SendResultEntry(status=failed, message_id=message_id) for message_id in message_ids]
    return S.SendMessageResponse(status=failed, entries=entries)


async def _next_chunk(chunks: AsyncIterator[list[MessageView]]) -> list[MessageView] | None:
    """The next chunk of a streamed receive, or None to end it. The stream already carries messages,
    so a failure now (e.g. the group reached its in-flight limit) ends it rather than answering an
    error: the messages written are leased and must reach the client."""
    try:
        return await anext(chunks, None)
    except errors.TxmqError:
        return None
    except Exception:
        log.exception("ending a receive early: leasing its next messages failed")
        return None


def _pull_status(status: ReadStatus, min_offset: int, max_offset: int) -> Any:
    if status is ReadStatus.FOUND:
        return convert.OK_STATUS
    if status in (ReadStatus.OFFSET_TOO_SMALL, ReadStatus.OFFSET_OVERFLOW):
        return convert.status(
            errors.ILLEGAL_OFFSET, f"offset out of range: the queue holds offsets {min_offset}..{max_offset}"
        )
    return _NOT_FOUND


def routed_host(host: str) -> str:
    """The host routes name for a door listening on ``host`` (a wildcard: loopback)."""
    return LOOPBACK_HOST if is_wildcard_host(host) else host


async def serve(
    broker: Broker,
    host: str,
    port: int,
    *,
    advertised_host: str | None = None,
    advertised_port: int | None = None,
    tls: grpc.ServerCredentials | None = None,
    plaintext: bool = True,
    backend_name: str | None = None,
) -> grpc.aio.Server:
    """Start MessagingService and the admin door on ``host:port`` (port 0: any free port).

    Plaintext (h2c) by default; with ``tls`` and ``plaintext=False`` the port speaks TLS only; with
    ``tls`` and ``plaintext`` both, a second port (``host:0``) speaks TLS next to the plaintext one, for
    a ``GrpcFront`` that takes both kinds of client on one public port (``advertised_port``, which
    routes then name). The bound ports are ``server.txmq_port`` and ``server.txmq_tls_port`` (None
    without TLS). With ``tls``, ``plaintext`` and ``backend_name`` as well, those two listen on Unix
    sockets in Linux's abstract namespace instead (``<backend_name>-plaintext`` and ``-tls``; nothing on
    disk to clean up, even after a kill -9), for a ``GrpcFront``: a relayed byte then costs the kernel
    about half of what a loopback TCP hop costs. ``server.txmq_backends``: their addresses, NUL first.
    """
    server = grpc.aio.server(
        maximum_concurrent_rpcs=broker.config.grpc_concurrent_rpcs_max,  # beyond: RESOURCE_EXHAUSTED
        options=[
            ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
            ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
            # gRPC's default SO_REUSEPORT lets a second broker bind a port the first one listens on:
            # both start "ready" and the kernel splits connections between them. A taken port must fail.
            ("grpc.so_reuseport", 0),
        ],
    )
    tls_bound: int | None = None
    backends: tuple[str, str] | None = None
    try:
        if tls is not None and plaintext and backend_name is not None:
            server.add_insecure_port(f"unix-abstract:{backend_name}-plaintext")
            server.add_secure_port(f"unix-abstract:{backend_name}-tls", tls)
            backends = (f"\0{backend_name}-plaintext", f"\0{backend_name}-tls")
            bound = 0
        elif tls is not None and not plaintext:
            bound = tls_bound = server.add_secure_port(f"{host}:{port}", tls)
        else:
            bound = server.add_insecure_port(f"{host}:{port}")
            if tls is not None:
                tls_bound = server.add_secure_port(f"{host}:0", tls)
    except RuntimeError as exc:  # grpc says only "Failed to bind"; the CLI reports OSErrors cleanly
        raise OSError(
            errno.EADDRINUSE,
            f"cannot bind the gRPC port {host}:{port}: address already in use (or not a local address)",
        ) from exc
    servicer = MessagingServicer(broker, advertised_host or routed_host(host), advertised_port or bound)
    server.add_generic_rpc_handlers((messaging_handler(servicer),))  # undecodable requests: BAD_REQUEST
    server.add_generic_rpc_handlers((admin_handler(broker),))
    await server.start()
    server.txmq_port = bound
    server.txmq_tls_port = tls_bound
    server.txmq_backends = backends
    return server
