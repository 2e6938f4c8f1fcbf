"""``GrpcTransport``: the SDK over ``apache.rocketmq.v2.MessagingService`` (RocketMQ 5 proxies, txmq :8081).

Every call carries ``x-mq-client-id`` / ``x-mq-language: PYTHON`` / ``x-mq-protocol: v2``. Routes come
from QueryRoute (cached ``route_ttl_s``); each endpoint in use gets one Telemetry stream
(``TelemetrySession``) carrying the client's settings (publishing topics for producers, the subscription
for consumers) and bringing back settings replies and transaction check-backs, which are answered by
the check handler with a unary EndTransaction(SOURCE_SERVER_CHECK). Heartbeats every
``heartbeat_interval_s``; NotifyClientTermination on close.

What v2 cannot express (``supports``): queue locks and send-back (a gRPC PushConsumer uses the POP
model: nack = ChangeInvisibleDuration with the group's back-off, then ForwardMessageToDeadLetterQueue),
choosing the queue of a send (the server places messages: round robin, or by ``message_group``) and
group membership (no RPC lists a group's members: ``consumer_ids`` is this client alone). A oneway
send is a SendMessage whose answer nobody waits for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import platform
import socket
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import grpc

import txmq
from txmq.client import _grpc_convert as conv
from txmq.client._grpc_telemetry import TelemetrySession
from txmq.client._remoting import new_client_id
from txmq.client._transport import (
    CheckHandler,
    CheckRequest,
    ConsumeMode,
    ConsumerInfo,
    Feature,
    OffsetSpec,
    OnReconnect,
    PullBatch,
    PullStatus,
    Registrations,
    SendDone,
    TransactionRef,
)
from txmq.common import errors, limits, names
from txmq.common.message import Message, MessageQueue, MessageView, SendResult
from txmq.protocol.grpc import pb
from txmq.protocol.grpc.convert import set_duration, set_timestamp

log = logging.getLogger(__name__)
S: Final = pb.service
_FEATURES: Final = frozenset(
    {Feature.POP, Feature.PULL, Feature.BATCH_SEND, Feature.DELIVERY_TIMESTAMP, Feature.ONEWAY}
)
_CLIENT_TYPES: Final = {
    ConsumeMode.PUSH: pb.ClientType.PUSH_CONSUMER,
    ConsumeMode.POP: pb.ClientType.SIMPLE_CONSUMER,
    ConsumeMode.PULL: pb.ClientType.PULL_CONSUMER,
}
_POLICIES: Final = {
    "beginning": pb.QueryOffsetPolicy.BEGINNING,
    "end": pb.QueryOffsetPolicy.END,
    "timestamp": pb.QueryOffsetPolicy.TIMESTAMP,
}
_CHANNEL_OPTIONS: Final = [
    ("grpc.max_receive_message_length", limits.grpc_message_bytes_max),
    ("grpc.max_send_message_length", limits.grpc_message_bytes_max),
    # reconnect quickly after a broker restart (gRPC's default back-off grows to minutes); gRPC jitters it
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]


@dataclasses.dataclass(frozen=True, slots=True)
class _Route:
    write: list[MessageQueue]
    read: list[MessageQueue]
    fetched_at: float


class GrpcTransport:
    """See the module docstring. ``endpoints``: ``"host:8081"`` or ``"h1:8081;h2:8081"``."""

    name = "grpc"

    def __init__(
        self,
        endpoints: str,
        *,
        request_timeout_s: float = 3.0,
        heartbeat_interval_s: float = 10.0,
        route_ttl_s: float = 30.0,
    ) -> None:
        cleaned = endpoints.replace("http://", "").replace("https://", "").replace(",", ";")
        self.endpoints = [e.strip() for e in cleaned.split(";") if e.strip()]
        if not self.endpoints:
            raise errors.InvalidArgument("endpoints must name at least one gRPC endpoint (host:8081)")
        self.client_id = new_client_id()
        self.request_timeout_s = request_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.route_ttl_s = route_ttl_s
        self.metadata: tuple[tuple[str, str], ...] = (
            ("x-mq-client-id", self.client_id), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"),
            ("x-mq-client-version", txmq.__version__),
        )  # fmt: skip
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, Any] = {}
        self._sessions: dict[str, TelemetrySession] = {}
        # endpoints that answered once: calls to them wait (within their deadline) for a reconnect
        # instead of failing at once; a never-reached endpoint fails fast
        self._reached: set[str] = set()
        self._routes: dict[str, _Route] = {}
        self._broker_addrs: dict[str, str] = {}
        self._registrations = Registrations()
        self._topics: set[str] = set()
        self._backoffs: dict[str, tuple[int, ...]] = {}
        self._check_handler: CheckHandler | None = None
        self._reconnect_hooks: list[OnReconnect] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._heartbeat_task: asyncio.Task[None] | None = None

    def supports(self, feature: Feature) -> bool:
        return feature in _FEATURES

    # ---- life cycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._heartbeat_task is None:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
            self._session(self.endpoints[0])

    async def close(self) -> None:
        """Finish oneway sends, tell every endpoint goodbye, close the streams and channels."""
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
            self._heartbeat_task = None
        if self._background:
            await asyncio.wait(list(self._background), timeout=self.request_timeout_s)
        for addr in list(self._channels):
            for group in list(self._registrations.consumers) or [""]:
                request = S.NotifyClientTerminationRequest()
                if group:
                    request.group.name = group
                with contextlib.suppress(errors.TxmqError):
                    await self._unary(addr, "NotifyClientTermination", request, timeout_s=1.0)
        for session in list(self._sessions.values()):
            await session.close()
        for channel in list(self._channels.values()):
            await channel.close()
        self._sessions.clear()
        self._channels.clear()
        self._stubs.clear()

    async def topic_exists(self, topic: str) -> bool:
        """txmq's admin call ``topic.describe`` (QueryRoute may auto-create the topic; this never does)."""
        addr = self.endpoints[0]
        self._stub(addr)  # opens the endpoint's channel
        call = self._channels[addr].unary_unary("/txmq.Admin/Call")  # bytes in, bytes out
        request = json.dumps({"op": "topic.describe", "args": {"name": topic}}).encode()
        try:
            reply = json.loads(await call(request, timeout=self.request_timeout_s))
        except grpc.RpcError as exc:
            raise errors.ConnectionError_(f"cannot reach the broker at {addr}: {exc}") from None
        if reply.get("ok"):
            return True
        code = int(reply.get("code", errors.INTERNAL_ERROR))
        if code == errors.TOPIC_NOT_FOUND:
            return False
        raise errors.for_code(code)(str(reply.get("error", "unknown error")))

    # ---- plumbing --------------------------------------------------------------------------------------
    def _stub(self, addr: str) -> Any:
        stub = self._stubs.get(addr)
        if stub is None:
            channel = grpc.aio.insecure_channel(addr, options=_CHANNEL_OPTIONS)
            self._channels[addr] = channel
            stub = self._stubs[addr] = pb.MessagingServiceStub(channel)
        return stub

    def _session(self, addr: str) -> TelemetrySession:
        session = self._sessions.get(addr)
        if session is None:
            session = TelemetrySession(
                self._stub(addr), self.metadata, self._settings_commands, self._on_command, self._reopened
            )
            self._sessions[addr] = session
            session.start()
        return session

    async def _unary(self, addr: str, method: str, request: Any, *, timeout_s: float | None = None) -> Any:
        """One unary RPC; a transport failure or a non-OK status raises the matching ``TxmqError``."""
        try:
            response = await getattr(self._stub(addr), method)(
                request, metadata=self.metadata, timeout=timeout_s or self.request_timeout_s,
                wait_for_ready=addr in self._reached,
            )  # fmt: skip
        except grpc.aio.AioRpcError as exc:
            raise conv.rpc_error(exc, method) from None
        self._reached.add(addr)
        conv.check(response.status, method)
        return response

    async def _stream(self, addr: str, method: str, request: Any, timeout_s: float) -> AsyncIterator[Any]:
        call = getattr(self._stub(addr), method)(
            request, metadata=self.metadata, timeout=timeout_s, wait_for_ready=addr in self._reached
        )
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as exc:
            raise conv.rpc_error(exc, method) from None
        finally:
            call.cancel()

    def _addr(self, mq: MessageQueue | None) -> str:
        if mq is not None and mq.broker_name in self._broker_addrs:
            return self._broker_addrs[mq.broker_name]
        return self.endpoints[0]

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- settings, commands, heartbeats ----------------------------------------------------------------
    def _settings_base(self, client_type: int) -> Any:
        settings = pb.Settings(client_type=client_type)
        host, _, port = self.endpoints[0].rpartition(":")
        settings.access_point.addresses.add(host=host, port=int(port or 8081))
        set_duration(settings.request_timeout, round(self.request_timeout_s * 1000))
        settings.user_agent.language = pb.definition.Language.PYTHON
        settings.user_agent.version = txmq.__version__
        settings.user_agent.platform = platform.platform()
        settings.user_agent.hostname = socket.gethostname()
        return settings

    def _settings_commands(self) -> list[Any]:
        """Consumers first, the producer last: a shared client is then found by check-backs."""
        commands = []
        for info in self._registrations.consumers.values():
            settings = self._settings_base(_CLIENT_TYPES[info.mode])
            settings.subscription.group.name = info.group
            settings.subscription.fifo = info.fifo
            for topic, expression in info.subscriptions.items():
                entry = settings.subscription.subscriptions.add()
                entry.topic.name = topic
                entry.expression.type = pb.FilterType.TAG
                entry.expression.expression = expression or "*"
            commands.append(S.TelemetryCommand(settings=settings))
        if self._registrations.producer_groups:
            settings = self._settings_base(pb.ClientType.PRODUCER)
            settings.publishing.topics.extend(conv.resource(t) for t in sorted(self._topics))
            commands.append(S.TelemetryCommand(settings=settings))
        return commands

    async def _on_command(self, command: Any) -> None:
        if command.HasField("settings") and int(command.status.code) == conv.OK:
            settings = command.settings
            if settings.HasField("subscription") and settings.subscription.group.name:
                schedule = conv.backoff_schedule_ms(settings.backoff_policy)
                self._backoffs[settings.subscription.group.name] = schedule
            for session in self._sessions.values():
                session.ready.set()  # each endpoint answers on its own stream; any answer will do here
        elif command.HasField("recover_orphaned_transaction_command"):
            self._spawn(self._on_check(command.recover_orphaned_transaction_command))

    async def _on_check(self, command: Any) -> None:
        view = conv.view_of(command.message, transaction_id=command.transaction_id)
        ref = TransactionRef(
            topic=view.topic, message_id=view.message_id, transaction_id=command.transaction_id
        )
        if self._check_handler is not None:
            await self._check_handler(CheckRequest("", view, ref))

    async def _reopened(self) -> None:
        for hook in self._reconnect_hooks:
            await hook()

    async def _announce(self) -> None:
        """Write the settings on every stream and wait (bounded) for the first answer."""
        session = self._session(self.endpoints[0])
        for each in list(self._sessions.values()):
            await each.resend()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(session.ready.wait(), self.request_timeout_s)

    async def heartbeat(self) -> None:
        """One Heartbeat per role to every endpoint in use; failures are retried next round."""
        requests = [S.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)] * bool(
            self._registrations.producer_groups
        )
        for info in self._registrations.consumers.values():
            requests.append(S.HeartbeatRequest(client_type=_CLIENT_TYPES[info.mode]))
            requests[-1].group.name = info.group
        for addr in list(self._channels):
            for request in requests:
                try:
                    await self._unary(addr, "Heartbeat", request)
                except errors.TxmqError as exc:
                    log.debug("heartbeat to %s failed: %s", addr, exc)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            await self.heartbeat()

    # ---- registration ----------------------------------------------------------------------------------
    async def register_producer(self, group: str, topics: Sequence[str] = ()) -> None:
        names.validate_group(group)
        self._registrations.producer_groups.add(group)
        for topic in topics:
            await self.route(topic, for_write=True)
        self._topics.update(topics)
        await self._announce()

    async def unregister_producer(self, group: str) -> None:
        self._registrations.producer_groups.discard(group)

    async def register_consumer(self, info: ConsumerInfo) -> None:
        names.validate_group(info.group)
        self._registrations.consumers[info.group] = info
        for topic in info.subscriptions:
            await self.route(topic, for_write=False)
        await self._announce()

    async def unregister_consumer(self, group: str) -> None:
        self._registrations.consumers.pop(group, None)

    def set_check_handler(self, handler: CheckHandler | None) -> None:
        self._check_handler = handler

    def on_reconnect(self, hook: OnReconnect) -> None:
        self._reconnect_hooks.append(hook)

    def retry_backoff_ms(self, group: str, attempt: int) -> int:
        """The group's redelivery delay after delivery ``attempt`` failed (from the settings reply)."""
        schedule = self._backoffs.get(group) or tuple(s * 1000 for s in conv.DELAY_LEVEL_S)
        return schedule[min(max(attempt, 1), len(schedule)) - 1]

    # ---- routes ----------------------------------------------------------------------------------------
    async def _fetch_route(self, topic: str) -> _Route:
        last: errors.TxmqError | None = None
        for addr in self.endpoints:
            request = S.QueryRouteRequest(topic=conv.resource(topic))
            host, _, port = addr.rpartition(":")
            request.endpoints.addresses.add(host=host, port=int(port or 8081))
            try:
                response = await self._unary(addr, "QueryRoute", request)
            except errors.NotFound:
                raise
            except errors.TxmqError as exc:
                last = exc
                continue
            write: list[MessageQueue] = []
            read: list[MessageQueue] = []
            for entry in response.message_queues:
                if entry.broker.id != 0:
                    continue
                mq = conv.queue_of(entry)
                self._broker_addrs[mq.broker_name] = conv.address_of(entry) or addr
                if entry.permission in (pb.Permission.WRITE, pb.Permission.READ_WRITE):
                    write.append(mq)
                if entry.permission in (pb.Permission.READ, pb.Permission.READ_WRITE):
                    read.append(mq)
            return _Route(write, read, time.monotonic())
        raise last or errors.ConnectionError_("no gRPC endpoint answered")

    async def route(self, topic: str, *, for_write: bool) -> list[MessageQueue]:
        route = self._routes.get(topic)
        if route is None or time.monotonic() - route.fetched_at > self.route_ttl_s:
            try:
                route = await self._fetch_route(topic)
            except errors.TxmqError:
                if route is None:
                    raise
            else:
                self._routes[topic] = route
        queues = route.write if for_write else route.read
        if not queues:
            kind = "writable" if for_write else "readable"
            raise errors.TopicNotFound(f"topic {topic} has no {kind} queue")
        return list(queues)

    def invalidate_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    # ---- producing -------------------------------------------------------------------------------------
    async def _publishing(self, topic: str) -> None:
        """A producer's first send to a topic adds it to the published topics (check-backs need it)."""
        if topic not in self._topics:
            self._topics.add(topic)
            if self._registrations.producer_groups:
                await self._announce()

    def cached_write_queues(self, topic: str) -> Sequence[MessageQueue] | None:
        return None  # the server places messages; sends go through ``send``

    def start_send(
        self, mq: MessageQueue, message: Message, *, producer_group: str, timeout_s: float, done: SendDone
    ) -> bool:
        return False

    def start_end_transaction(
        self, ref: TransactionRef, *, producer_group: str, commit: bool | None, from_check: bool
    ) -> bool:
        return False  # EndTransaction is a unary call: ``end_transaction``

    async def send(
        self, mq: MessageQueue | None, messages: Sequence[Message], *, producer_group: str, timeout_s: float
    ) -> list[SendResult]:
        """One SendMessage with every message (a batch is one request: all stored, or none)."""
        await self._publishing(messages[0].topic)
        now = int(time.time() * 1000)
        request = S.SendMessageRequest(messages=[conv.wire_message(m, now_ms=now) for m in messages])
        response = await self._unary(self._addr(mq), "SendMessage", request, timeout_s=timeout_s)
        broker = mq.broker_name if mq is not None else next(iter(self._broker_addrs), "")
        results = []
        for entry in response.entries:
            conv.check(entry.status, "SendMessage")
            result = SendResult(
                message_id=entry.message_id, queue=MessageQueue(messages[0].topic, -1, broker),
                queue_offset=int(entry.offset), transaction_id=entry.transaction_id or None,
                recall_handle=entry.recall_handle or None,
            )  # fmt: skip
            results.append(result)
        if len(results) != len(messages):
            raise errors.ProtocolError(f"{len(messages)} messages sent, {len(results)} results returned")
        return results

    async def send_oneway(self, mq: MessageQueue | None, message: Message, *, producer_group: str) -> None:
        """A SendMessage whose answer is not awaited (v2 has no oneway); failures are only logged."""

        async def fire() -> None:
            try:
                await self.send(
                    mq, [message], producer_group=producer_group, timeout_s=self.request_timeout_s
                )
            except errors.TxmqError as exc:
                log.debug("oneway send failed: %s", exc)

        self._spawn(fire())

    async def end_transaction(
        self, ref: TransactionRef, *, producer_group: str, commit: bool | None, from_check: bool
    ) -> None:
        if commit is None:
            return  # v2 has no "unknown" resolution: saying nothing lets the check-back decide
        resolution = pb.TransactionResolution.COMMIT if commit else pb.TransactionResolution.ROLLBACK
        source = (
            pb.TransactionSource.SOURCE_SERVER_CHECK if from_check else pb.TransactionSource.SOURCE_CLIENT
        )
        request = S.EndTransactionRequest(
            topic=conv.resource(ref.topic), message_id=ref.message_id, transaction_id=ref.transaction_id,
            resolution=resolution, source=source,
        )  # fmt: skip
        await self._unary(self._addr(None), "EndTransaction", request)

    # ---- offset consuming ------------------------------------------------------------------------------
    async def pull(
        self,
        group: str,
        mq: MessageQueue,
        offset: int,
        *,
        max_messages: int,
        expression: str,
        long_poll_ms: int,
        max_bytes: int,
    ) -> PullBatch:
        request = S.PullMessageRequest(
            group=conv.resource(group), message_queue=conv.wire_queue(mq), offset=offset,
            batch_size=max_messages,
        )  # fmt: skip
        request.filter_expression.type = pb.FilterType.TAG
        request.filter_expression.expression = expression or "*"
        set_duration(request.long_polling_timeout, long_poll_ms)
        status = PullStatus.NO_NEW_MESSAGE
        messages: list[MessageView] = []
        next_offset = offset
        timeout = long_poll_ms / 1000 + self.request_timeout_s
        async for response in self._stream(self._addr(mq), "PullMessage", request, timeout):
            kind = response.WhichOneof("content")
            if kind == "status":
                status = _pull_status(response.status)
            elif kind == "message":
                messages.append(conv.view_of(response.message))
            elif kind == "next_offset":
                next_offset = int(response.next_offset)
        if messages:
            status = PullStatus.FOUND
        return PullBatch(status, messages, next_offset, -1, -1)

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None:
        request = S.GetOffsetRequest(group=conv.resource(group), message_queue=conv.wire_queue(mq))
        try:
            response = await self._unary(self._addr(mq), "GetOffset", request)
        except errors.OffsetNotFound:
            return None
        return int(response.offset)

    async def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        request = S.UpdateOffsetRequest(
            group=conv.resource(group), message_queue=conv.wire_queue(mq), offset=offset
        )
        await self._unary(self._addr(mq), "UpdateOffset", request)

    async def resolve_offset(self, mq: MessageQueue, spec: OffsetSpec) -> int:
        request = S.QueryOffsetRequest(
            message_queue=conv.wire_queue(mq), query_offset_policy=_POLICIES[spec.kind]
        )
        if spec.kind == "timestamp":
            set_timestamp(request.timestamp, spec.timestamp_ms)
        return int((await self._unary(self._addr(mq), "QueryOffset", request)).offset)

    async def send_back(
        self, group: str, message: MessageView, *, delay_level: int, max_reconsume_times: int
    ) -> None:
        raise errors.Unsupported(
            "send-back is a remoting call; over gRPC a nack changes the invisible duration"
        )

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        """v2 has no RPC listing a group's members: every gRPC member sees itself alone."""
        return [self.client_id]

    async def lock_queues(self, group: str, mqs: Sequence[MessageQueue]) -> set[MessageQueue]:
        raise errors.Unsupported("queue locks are remoting-only; over gRPC use a FIFO topic (message groups)")

    async def unlock_queues(self, group: str, mqs: Sequence[MessageQueue]) -> None:
        raise errors.Unsupported("queue locks are remoting-only; over gRPC use a FIFO topic (message groups)")

    # ---- POP consuming ---------------------------------------------------------------------------------
    async def receive(
        self, group: str, topic: str, expression: str, *, max_messages: int, invisible_ms: int, wait_ms: int
    ) -> list[MessageView]:
        queues = await self.route(topic, for_write=False)
        request = S.ReceiveMessageRequest(
            group=conv.resource(group), message_queue=conv.wire_queue(queues[0]), batch_size=max_messages,
            auto_renew=False,
        )  # fmt: skip
        request.filter_expression.type = pb.FilterType.TAG
        request.filter_expression.expression = expression or "*"
        set_duration(request.invisible_duration, invisible_ms)
        set_duration(request.long_polling_timeout, wait_ms)
        messages: list[MessageView] = []
        timeout = wait_ms / 1000 + self.request_timeout_s
        async for response in self._stream(self._addr(queues[0]), "ReceiveMessage", request, timeout):
            kind = response.WhichOneof("content")
            if kind == "status" and int(response.status.code) != conv.MESSAGE_NOT_FOUND:
                conv.check(response.status, "ReceiveMessage")
            elif kind == "message":
                messages.append(conv.view_of(response.message))
        return messages

    async def ack(self, group: str, message: MessageView) -> None:
        request = S.AckMessageRequest(group=conv.resource(group), topic=conv.resource(message.topic))
        request.entries.add(message_id=message.message_id, receipt_handle=_handle(message))
        response = await self._unary(self._addr(None), "AckMessage", request)
        for entry in response.entries:
            conv.check(entry.status, "AckMessage")

    async def change_invisible_duration(
        self, group: str, message: MessageView, invisible_ms: int
    ) -> MessageView:
        request = S.ChangeInvisibleDurationRequest(
            group=conv.resource(group), topic=conv.resource(message.topic),
            receipt_handle=_handle(message), message_id=message.message_id,
        )  # fmt: skip
        set_duration(request.invisible_duration, invisible_ms)
        response = await self._unary(self._addr(None), "ChangeInvisibleDuration", request)
        return dataclasses.replace(message, receipt_handle=response.receipt_handle)

    async def forward_to_dlq(self, group: str, message: MessageView, *, max_attempts: int) -> None:
        """Move a received message to ``%DLQ%<group>`` now (and ack it): its retries are used up."""
        request = S.ForwardMessageToDeadLetterQueueRequest(
            group=conv.resource(group), topic=conv.resource(message.topic), receipt_handle=_handle(message),
            message_id=message.message_id, delivery_attempt=message.delivery_attempt,
            max_delivery_attempts=max_attempts,
        )  # fmt: skip
        await self._unary(self._addr(None), "ForwardMessageToDeadLetterQueue", request)


def _handle(message: MessageView) -> str:
    if not message.receipt_handle:
        raise errors.InvalidReceiptHandle(f"message {message.message_id} was not received by a POP consumer")
    return message.receipt_handle


def _pull_status(status: Any) -> PullStatus:
    code = int(status.code)
    if code == conv.OK:
        return PullStatus.FOUND
    if code == conv.MESSAGE_NOT_FOUND:
        return PullStatus.NO_NEW_MESSAGE
    if code == conv.ILLEGAL_OFFSET:
        return PullStatus.OFFSET_ILLEGAL
    conv.check(status, "PullMessage")
    return PullStatus.NO_NEW_MESSAGE


__all__ = ["GrpcTransport"]
