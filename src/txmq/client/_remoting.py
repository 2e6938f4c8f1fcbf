"""``RemotingTransport``: the SDK over RocketMQ's TCP protocol, through a name server (the default).

Routes come from the name server (GET_ROUTEINFO_BY_TOPIC, cached ``route_ttl_s``), requests go to the
master broker of a queue's broker name. Heartbeats (HEART_BEAT) tell every broker this client talks to
which producer groups (for transaction check-back on this very connection) and consumer groups it runs;
they are repeated every ``heartbeat_interval_s`` and right after every (re)connect. Broker-initiated
requests are answered here: CHECK_TRANSACTION_STATE goes to the check handler, NOTIFY_CONSUMER_IDS_CHANGED
to the rebalance hooks.

Delivery timestamps travel as RocketMQ 5's ``TIMER_DELIVER_MS`` property. Not expressible over remoting
(``Unsupported``): the POP model (receive / ack / change invisible duration): txmq's remoting door has
no POP codes; use the gRPC transport for a SimpleConsumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from txmq.client import _remoting_convert as conv
from txmq.client import _single as single
from txmq.client._remoting_channel import _DRAIN_ABOVE_BYTES, ChannelPool, RemotingChannel
from txmq.client._transport import (
    CheckHandler,
    CheckRequest,
    ConsumerInfo,
    Feature,
    OffsetSpec,
    OnReconnect,
    PullBatch,
    PullStatus,
    RawPullBatch,
    Registrations,
    SendDone,
    TransactionRef,
)
from txmq.common import errors, limits, msgid, names
from txmq.common.message import Message, MessageQueue, MessageView, SendResult
from txmq.protocol.remoting import bodies, headers
from txmq.protocol.remoting.codes import (
    PERM_READ,
    PERM_WRITE,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RequestCode,
    ResponseCode,
)
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.frame import binary_pair, json_quote
from txmq.protocol.remoting.message_codec import decode_message
from txmq.protocol.remoting.status import error_for_response

log = logging.getLogger(__name__)

_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MESSAGE,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MESSAGE,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
_DECISION = {True: TRANSACTION_COMMIT_TYPE, False: TRANSACTION_ROLLBACK_TYPE, None: TRANSACTION_NOT_TYPE}
_instance = itertools.count()


def _half_log_offset(ref: TransactionRef) -> int:
    """The half's CommitLog offset: known from the send, else read from its offset message id (-1)."""
    offset = ref.commit_log_offset
    if offset < 0 and ref.offset_message_id:
        parsed = msgid.offset_of_offset_message_id(ref.offset_message_id)
        offset = -1 if parsed is None else parsed
    return offset


def _end_fields(
    ref: TransactionRef, producer_group: str, commit: bool | None, from_check: bool
) -> dict[str, str]:
    """END_TRANSACTION's extFields for ``ref``."""
    offset = _half_log_offset(ref)
    header = headers.EndTransactionRequestHeader(
        producer_group=producer_group, tran_state_table_offset=ref.queue_offset, commit_log_offset=offset,
        commit_or_rollback=_DECISION[commit], msg_id=ref.message_id,
        topic=ref.topic, from_transaction_check=from_check, transaction_id=ref.transaction_id,
    )  # fmt: skip
    return header.to_ext_fields()


def _end_json(ref: TransactionRef, producer_group: str, commit: bool | None, from_check: bool) -> str:
    """``_end_fields`` rendered as the JSON header writes extFields (tests/unit/test_remoting_end.py
    holds them to the same frame bytes): one format instead of a header dataclass, its field table
    walk and a dict per END_TRANSACTION. Raises ``TypeError`` for a reference whose texts are not
    ``str`` (then ``_end_fields`` goes the general way)."""
    offset = _half_log_offset(ref)
    return (
        f'{{"producerGroup":{json_quote(producer_group)},"tranStateTableOffset":"{int(ref.queue_offset)}",'
        f'"commitLogOffset":"{int(offset)}","commitOrRollback":"{int(_DECISION[commit])}",'
        f'"msgId":{json_quote(ref.message_id)},"topic":{json_quote(ref.topic)},'
        f'"fromTransactionCheck":"{"true" if from_check else "false"}",'
        f'"transactionId":{json_quote(ref.transaction_id)}}}'
    )


def _end_binary_pairs(
    ref: TransactionRef, producer_group: str, commit: bool | None, from_check: bool
) -> bytes:
    """``_end_json`` for a ROCKETMQ channel: ``_end_fields`` as ``frame.binary_ext`` writes them
    (tests/unit/test_remoting_end.py), pair by pair: the reference of ``_end_binary``; ``TypeError``
    as ``_end_json`` raises it."""
    offset = _half_log_offset(ref)
    return b"".join(
        (
            binary_pair("producerGroup", producer_group),
            binary_pair("tranStateTableOffset", str(int(ref.queue_offset))),
            binary_pair("commitLogOffset", str(int(offset))),
            binary_pair("commitOrRollback", str(int(_DECISION[commit]))),
            binary_pair("msgId", ref.message_id),
            binary_pair("topic", ref.topic),
            binary_pair("fromTransactionCheck", "true" if from_check else "false"),
            binary_pair("transactionId", ref.transaction_id),
        )
    )


def _binary_key(key: str) -> bytes:
    """A pair's bytes up to its value's length, as ``binary_pair`` writes them: int16 length, key."""
    return binary_pair(key, "")[:-4]


# END_TRANSACTION's pairs, in _end_fields' order: the keys' bytes and the constant pairs rendered once
_U32: Final = tuple(n.to_bytes(4, "big") for n in range(256))  # value lengths up to 255
_END_TRAN: Final = _binary_key("tranStateTableOffset")
_END_LOG: Final = _binary_key("commitLogOffset")
# the decision pair, then the msgId key; the check flag pair, then the transactionId key
_END_COMMIT: Final = binary_pair("commitOrRollback", str(int(_DECISION[True]))) + _binary_key("msgId")
_END_ROLLBACK: Final = binary_pair("commitOrRollback", str(int(_DECISION[False]))) + _binary_key("msgId")
_END_NOT: Final = binary_pair("commitOrRollback", str(int(_DECISION[None]))) + _binary_key("msgId")
_END_FROM_CHECK: Final = binary_pair("fromTransactionCheck", "true") + _binary_key("transactionId")
_END_NOT_FROM_CHECK: Final = binary_pair("fromTransactionCheck", "false") + _binary_key("transactionId")
_END_PAIRS_MAX: Final = 1024  # groups and topics whose pairs are kept rendered (then forgotten)
_end_group_pairs: dict[str, bytes] = {}
_end_topic_pairs: dict[str, bytes] = {}


def _u32(n: int) -> bytes:
    return _U32[n] if n < 256 else n.to_bytes(4, "big")


def _text_bytes(value: str) -> bytes:
    if type(value) is not str:  # binary_pair's refusal (compiled code raises it reading the field)
        raise TypeError(f"extFields value of {type(value).__name__}, not str")
    return value.encode("utf-8")


def _kept_pair(pairs: dict[str, bytes], key: str, value: str) -> bytes:
    """``binary_pair(key, value)``, kept in ``pairs`` by value (a producer's group, its topics)."""
    pair = pairs.get(value) if type(value) is str else None
    if pair is None:
        pair = binary_pair(key, value)
        if len(pairs) >= _END_PAIRS_MAX:
            pairs.clear()
        pairs[value] = pair
    return pair


def _end_binary(ref: TransactionRef, producer_group: str, commit: bool | None, from_check: bool) -> bytes:
    """``_end_binary_py`` in one C call (``_batchsend.end_binary``) once the group's and the topic's
    pairs are kept and the offsets and ids are plain (exact ints, ASCII ids); else ``_end_binary_py``
    (tests/unit/test_remoting_end.py, tests/property/test_tx_native.py hold them byte-equal)."""
    if single.END_BINARY is not None:
        group_pair = _end_group_pairs.get(producer_group) if type(producer_group) is str else None
        topic = ref.topic
        topic_pair = _end_topic_pairs.get(topic) if type(topic) is str else None
        if group_pair is not None and topic_pair is not None:
            made: bytes | None = single.END_BINARY(
                group_pair,
                ref.queue_offset,
                _half_log_offset(ref),
                _END_NOT if commit is None else _END_COMMIT if commit else _END_ROLLBACK,
                ref.message_id,
                topic_pair,
                _END_FROM_CHECK if from_check else _END_NOT_FROM_CHECK,
                ref.transaction_id,
            )
            if made is not None:
                return made
    return _end_binary_py(ref, producer_group, commit, from_check)


def _end_binary_py(ref: TransactionRef, producer_group: str, commit: bool | None, from_check: bool) -> bytes:
    """``_end_binary_pairs`` (the reference, tests/unit/test_remoting_end.py) from parts rendered once:
    the group's and the topic's pairs kept per value, the keys and the decision and check flag pairs
    constant; only the two offsets and the two ids are encoded per END_TRANSACTION."""
    offset = _half_log_offset(ref)
    tran = str(int(ref.queue_offset)).encode("ascii")
    log_offset = str(int(offset)).encode("ascii")
    msg_id = _text_bytes(ref.message_id)
    transaction_id = _text_bytes(ref.transaction_id)
    decision = _END_NOT if commit is None else _END_COMMIT if commit else _END_ROLLBACK
    return b"".join(
        (
            _kept_pair(_end_group_pairs, "producerGroup", producer_group),
            _END_TRAN,
            _U32[len(tran)],
            tran,
            _END_LOG,
            _U32[len(log_offset)],
            log_offset,
            decision,
            _u32(len(msg_id)),
            msg_id,
            _kept_pair(_end_topic_pairs, "topic", ref.topic),
            _END_FROM_CHECK if from_check else _END_NOT_FROM_CHECK,
            _u32(len(transaction_id)),
            transaction_id,
        )
    )


def new_client_id() -> str:
    """``host@pid@index@base36-time``, the shape RocketMQ clients use."""
    try:
        host = socket.gethostbyname(socket.gethostname())
    except OSError:
        host = "127.0.0.1"
    return f"{host}@{os.getpid()}@{next(_instance)}@{int(time.time() * 1000):x}"


@dataclass(frozen=True, slots=True)
class _Route:
    write: list[MessageQueue]
    read: list[MessageQueue]
    addrs: dict[str, str]  # broker name -> master address
    fetched_at: float


def _route_of(topic: str, data: bodies.TopicRouteData) -> _Route:
    addrs = {b.broker_name: b.broker_addrs[0] for b in data.broker_datas if 0 in b.broker_addrs}
    write: list[MessageQueue] = []
    read: list[MessageQueue] = []
    for q in sorted(data.queue_datas, key=lambda q: q.broker_name):
        if q.broker_name not in addrs:
            continue
        if q.perm & PERM_WRITE:
            write += [MessageQueue(topic, i, q.broker_name) for i in range(q.write_queue_nums)]
        if q.perm & PERM_READ:
            read += [MessageQueue(topic, i, q.broker_name) for i in range(q.read_queue_nums)]
    return _Route(write, read, addrs, time.monotonic())


class RemotingTransport:
    """See the module docstring. ``endpoints``: name servers, ``"host:9876"`` or ``"h1:9876;h2:9876"``."""

    name = "remoting"

    def __init__(
        self,
        endpoints: str,
        *,
        request_timeout_s: float = 3.0,
        heartbeat_interval_s: float = 10.0,
        route_ttl_s: float = 30.0,
    ) -> None:
        self.namesrvs = [e.strip() for e in endpoints.replace(",", ";").split(";") if e.strip()]
        if not self.namesrvs:
            raise errors.InvalidArgument("endpoints must name at least one name server (host:9876)")
        self.client_id = new_client_id()
        self.request_timeout_s = request_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.route_ttl_s = route_ttl_s
        self._pool = ChannelPool(on_request=self._on_request, on_connect=self._on_connect)
        self._routes: dict[str, _Route] = {}
        self._broker_addrs: dict[str, str] = {}
        self._registrations = Registrations()
        self._check_handler: CheckHandler | None = None
        self._reconnect_hooks: list[OnReconnect] = []
        self._ids_changed_hooks: list[Callable[[str], Awaitable[None]]] = []
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._headers = single.SendHeaders()
        self._binary_headers = single.BinarySendHeaders()

    def supports(self, feature: Feature) -> bool:
        return feature is not Feature.POP

    async def start(self) -> None:
        if self._heartbeat_task is None:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def close(self) -> None:
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
        for addr in list(self._broker_addrs.values()):
            with contextlib.suppress(errors.TxmqError):
                await self._unregister_all(addr)
        await self._pool.close()

    # ---- plumbing --------------------------------------------------------------------------------
    async def _call(
        self, addr: str, code: int, ext: dict[str, str], body: bytes = b"", *, timeout_s: float | None = None
    ) -> RemotingCommand:
        channel = await self._pool.get(addr)
        return await channel.request(code, ext, body, timeout_s=timeout_s or self.request_timeout_s)

    async def _call_ok(
        self, addr: str, code: int, ext: dict[str, str], body: bytes = b"", *, ok: Sequence[int] = (0,)
    ) -> RemotingCommand:
        response = await self._call(addr, code, ext, body)
        if response.code not in ok:
            raise error_for_response(response.code, response.remark)
        return response

    async def _on_connect(self, channel: RemotingChannel) -> None:
        if channel.addr in self.namesrvs:
            return
        await self._heartbeat_on(channel)
        for hook in self._reconnect_hooks:
            await hook()

    async def _on_request(self, channel: RemotingChannel, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            await self._on_check(cmd, channel.addr)
            return None
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = cmd.ext_fields.get("consumerGroup", "")
            for hook in self._ids_changed_hooks:
                await hook(group)
            return None
        return make_response(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"code {cmd.code} not served")

    async def _on_check(self, cmd: RemotingCommand, broker_addr: str) -> None:
        header = headers.CheckTransactionStateRequestHeader.from_command(cmd)
        wire, _ = decode_message(cmd.body)
        transaction_id = header.transaction_id or wire.properties.get("__transactionId__") or ""
        view = conv.view_of(wire, transaction_id=transaction_id)
        ref = TransactionRef(
            topic=view.topic, message_id=header.msg_id or view.message_id, transaction_id=transaction_id,
            commit_log_offset=header.commit_log_offset, queue_offset=header.tran_state_table_offset,
            offset_message_id=header.offset_msg_id, broker_addr=broker_addr,
        )  # fmt: skip
        group = wire.properties.get("PGROUP", "")
        if self._check_handler is not None:
            await self._check_handler(CheckRequest(group, view, ref))

    # ---- registration -----------------------------------------------------------------------------
    def _heartbeat_body(self) -> bytes:
        consumers = [
            bodies.ConsumerData(
                group_name=info.group,
                consume_type=info.mode.value,
                subscriptions=[bodies.SubscriptionData(t, e or "*") for t, e in info.subscriptions.items()],
            )
            for info in self._registrations.consumers.values()
        ]
        data = bodies.HeartbeatData(self.client_id, sorted(self._registrations.producer_groups), consumers)
        return data.to_json()

    async def _heartbeat_on(self, channel: RemotingChannel) -> None:
        response = await channel.request(
            RequestCode.HEART_BEAT, {}, self._heartbeat_body(), timeout_s=self.request_timeout_s
        )
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark)

    async def heartbeat(self) -> None:
        """Tell every known broker who this client is; failures are logged and retried next round."""
        for addr in set(self._broker_addrs.values()):
            try:
                await self._heartbeat_on(await self._pool.get(addr))
            except errors.TxmqError as exc:
                log.debug("heartbeat to %s failed: %s", addr, exc)

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            await self.heartbeat()

    async def register_producer(self, group: str, topics: Sequence[str] = ()) -> None:
        names.validate_group(group)
        self._registrations.producer_groups.add(group)
        for topic in topics:
            await self.route(topic, for_write=True)
        await self.heartbeat()

    async def unregister_producer(self, group: str) -> None:
        self._registrations.producer_groups.discard(group)
        for addr in set(self._broker_addrs.values()):
            with contextlib.suppress(errors.TxmqError):
                ext = headers.UnregisterClientRequestHeader(self.client_id, producer_group=group)
                await self._call(addr, RequestCode.UNREGISTER_CLIENT, ext.to_ext_fields())

    async def register_consumer(self, info: ConsumerInfo) -> None:
        names.validate_group(info.group)
        self._registrations.consumers[info.group] = info
        for topic in info.subscriptions:
            await self.route(topic, for_write=False)
        await self.heartbeat()

    async def unregister_consumer(self, group: str) -> None:
        self._registrations.consumers.pop(group, None)
        for addr in set(self._broker_addrs.values()):
            with contextlib.suppress(errors.TxmqError):
                ext = headers.UnregisterClientRequestHeader(self.client_id, consumer_group=group)
                await self._call(addr, RequestCode.UNREGISTER_CLIENT, ext.to_ext_fields())

    async def _unregister_all(self, addr: str) -> None:
        ext = headers.UnregisterClientRequestHeader(self.client_id)
        channel = self._pool.channels()
        if any(c.addr == addr for c in channel):
            await self._call(addr, RequestCode.UNREGISTER_CLIENT, ext.to_ext_fields(), timeout_s=1.0)

    def set_check_handler(self, handler: CheckHandler | None) -> None:
        self._check_handler = handler

    def on_reconnect(self, hook: OnReconnect) -> None:
        self._reconnect_hooks.append(hook)

    def on_consumer_ids_changed(self, hook: Callable[[str], Awaitable[None]]) -> None:
        self._ids_changed_hooks.append(hook)

    # ---- routes -----------------------------------------------------------------------------------
    async def _fetch_route(self, topic: str) -> _Route:
        last: errors.TxmqError | None = None
        for addr in self.namesrvs:
            try:
                response = await self._call(
                    addr,
                    RequestCode.GET_ROUTEINFO_BY_TOPIC,
                    headers.GetRouteInfoRequestHeader(topic).to_ext_fields(),
                )
            except errors.TxmqError as exc:
                last = exc
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                raise errors.TopicNotFound(f"topic {topic} does not exist (name server {addr})")
            if response.code != ResponseCode.SUCCESS:
                raise error_for_response(response.code, response.remark)
            route = _route_of(topic, bodies.TopicRouteData.from_json(response.body))
            self._broker_addrs.update(route.addrs)
            return route
        raise last or errors.ConnectionError_("no name server answered")

    async def _route(self, topic: str) -> _Route:
        route = self._routes.get(topic)
        if route is None or time.monotonic() - route.fetched_at > self.route_ttl_s:
            try:
                route = await self._fetch_route(topic)
            except errors.TxmqError:
                if route is None:
                    raise
                return route  # a stale route is better than none while the name server is away
            self._routes[topic] = route
        return route

    async def route(self, topic: str, *, for_write: bool) -> list[MessageQueue]:
        route = await self._route(topic)
        queues = route.write if for_write else route.read
        if not queues:
            raise errors.TopicNotFound(
                f"topic {topic} has no {'writable' if for_write else 'readable'} queue"
            )
        return list(queues)

    def invalidate_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    async def topic_exists(self, topic: str) -> bool:
        """The name server's topic list (GET_ALL_TOPIC_LIST_FROM_NAMESERVER) names ``topic``; unlike a
        route lookup, this never creates it."""
        last: errors.TxmqError | None = None
        for addr in self.namesrvs:
            try:
                response = await self._call(addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
            except errors.TxmqError as exc:
                last = exc
                continue
            if response.code != ResponseCode.SUCCESS:
                raise error_for_response(response.code, response.remark)
            return topic in bodies.TopicList.from_json(response.body).topic_list
        raise last or errors.ConnectionError_("no name server answered")

    async def _addr(self, mq: MessageQueue) -> str:
        addr = self._broker_addrs.get(mq.broker_name)
        if addr is None:
            await self._route(mq.topic)
            addr = self._broker_addrs.get(mq.broker_name)
        if addr is None:
            raise errors.NotFound(f"no address for broker {mq.broker_name}")
        return addr

    async def _any_mq(self, topic: str) -> MessageQueue:
        return (await self.route(topic, for_write=True))[0]

    # ---- producing ----------------------------------------------------------------------------------
    def _send_request(
        self, mq: MessageQueue, messages: Sequence[Message], producer_group: str, queue_id: int
    ) -> tuple[int, dict[str, str], bytes, list[str]]:
        now = int(time.time() * 1000)
        first = messages[0]
        batch = len(messages) > 1
        body: bytes | None = None
        if batch:
            # a plain batch (no ids, properties, tags, keys...): its ids and body in one C pass
            plain = single.plain_batch(messages, producer_group, now)
            if plain is not None:
                body, ids = plain
            else:  # the ids a batch lacks made at once (the same ids as a call per message)
                fresh = iter(msgid.new_message_ids(now, sum(1 for m in messages if not m.message_id)))
                ids = [m.message_id or next(fresh) for m in messages]
        else:
            ids = [first.message_id or msgid.new_message_id(now)]
        ext = headers.send_v2_fields(
            producer_group or "DEFAULT_PRODUCER", mq.topic, names.DEFAULT_TOPIC,
            limits.queues_per_topic_default, queue_id, conv.sys_flag_of(first), now,
            None if batch else conv.properties_text(first, ids[0], producer_group),
            batch, mq.broker_name,
        )  # fmt: skip
        if not batch:
            return RequestCode.SEND_MESSAGE_V2, ext, bytes(first.body), ids
        if body is None:
            body = conv.batch_body(messages, ids, producer_group)
        return RequestCode.SEND_BATCH_MESSAGE, ext, body, ids

    def _single_request(
        self, mq: MessageQueue, message: Message, producer_group: str, queue_id: int
    ) -> tuple[str, bytes, str]:
        """``_send_request`` of one message with the header rendered as JSON text: its constant
        fields once per queue (``_single.SendHeaders``), only the time and the properties per message."""
        return self._headers.request(mq, message, producer_group, queue_id)

    def _single_binary_request(
        self, mq: MessageQueue, message: Message, producer_group: str, queue_id: int
    ) -> tuple[bytes, bytes, str]:
        """``_single_request`` for a ROCKETMQ channel: the header as ``frame.binary_ext`` bytes, its
        constant pairs once per queue (``_single.BinarySendHeaders``)."""
        return self._binary_headers.request(mq, message, producer_group, queue_id)

    async def send(
        self, mq: MessageQueue | None, messages: Sequence[Message], *, producer_group: str, timeout_s: float
    ) -> list[SendResult]:
        target = mq or await self._any_mq(messages[0].topic)
        queue_id = -1 if mq is None else mq.queue_id
        # the address and the channel are known but for the first send (or after a reconnect): look
        # them up without a coroutine each
        addr = self._broker_addrs.get(target.broker_name) or await self._addr(target)
        channel = self._pool.open_channel(addr) or await self._pool.get(addr)
        if len(messages) == 1:
            if channel.binary:
                ext_bin, body, message_id = self._single_binary_request(
                    target, messages[0], producer_group, queue_id
                )
                future = channel.start_binary_request(
                    RequestCode.SEND_MESSAGE_V2, ext_bin, body, timeout_s=timeout_s
                )
            else:
                ext_json, body, message_id = self._single_request(
                    target, messages[0], producer_group, queue_id
                )
                future = channel.start_json_request(
                    RequestCode.SEND_MESSAGE_V2, ext_json, body, timeout_s=timeout_s
                )
            return [single.send_result(target, message_id, await channel.answer(future))]
        code, ext, body, ids = self._send_request(target, messages, producer_group, queue_id)
        response = await channel.request(code, ext, body, timeout_s=timeout_s)
        return single.send_results(target, ids, response)

    def cached_write_queues(self, topic: str) -> Sequence[MessageQueue] | None:
        route = self._routes.get(topic)
        if route is None or not route.write or time.monotonic() - route.fetched_at > self.route_ttl_s:
            return None
        return route.write

    def start_send(
        self, mq: MessageQueue, message: Message, *, producer_group: str, timeout_s: float, done: SendDone
    ) -> bool:
        started = self.start_send_request(mq, message, producer_group=producer_group, timeout_s=timeout_s)
        if started is None:
            return False
        future, message_id = started

        def answered(future: asyncio.Future[RemotingCommand]) -> None:
            try:
                result = single.send_result(mq, message_id, future.result())
            except BaseException as exc:  # noqa: BLE001 - handed to ``done``, as ``send`` would raise it
                done(None, exc)
            else:
                done(result, None)

        future.add_done_callback(answered)
        return True

    def start_send_request(
        self, mq: MessageQueue, message: Message, *, producer_group: str, timeout_s: float
    ) -> tuple[asyncio.Future[RemotingCommand], str] | None:
        """``start_send`` for a caller that awaits the answer itself: the channel's future of the
        response and the message id (``send_result`` turns them into the ``SendResult``, or raises what
        the response code means); None (nothing sent) when there is no open connection yet. No done
        callback, no second future between the read callback and the awaiting task."""
        addr = self._broker_addrs.get(mq.broker_name)
        channel = None if addr is None else self._pool.open_channel(addr)
        if channel is None:
            return None
        return self._start_single_request(channel, mq, message, producer_group, timeout_s)

    def _start_single_request(
        self,
        channel: RemotingChannel,
        mq: MessageQueue,
        message: Message,
        producer_group: str,
        timeout_s: float,
    ) -> tuple[asyncio.Future[RemotingCommand], str]:
        """One message's SEND_MESSAGE_V2 to ``mq`` started on ``channel`` in its serialization (the
        ROCKETMQ binary header by default, JSON when the channel was made so): the future of the
        response and the message id."""
        if channel.binary:
            ext_bin, body, message_id = self._binary_headers.request(mq, message, producer_group, mq.queue_id)
            future = channel.start_binary_request(
                RequestCode.SEND_MESSAGE_V2, ext_bin, body, timeout_s=timeout_s
            )
        else:
            ext_json, body, message_id = self._headers.request(mq, message, producer_group, mq.queue_id)
            future = channel.start_json_request(
                RequestCode.SEND_MESSAGE_V2, ext_json, body, timeout_s=timeout_s
            )
        return future, message_id

    def start_single(
        self, mq: MessageQueue, message: Message, producer_group: str, timeout_s: float
    ) -> tuple[asyncio.Future[RemotingCommand], str] | None:
        """``start_send_request`` for ``Producer.send``, which awaits the future itself (no
        ``send`` and ``RemotingChannel.answer`` coroutines per message): also None (nothing sent)
        when the connection's socket buffer is over the mark ``answer`` drains at, so such a send
        goes through ``send`` and waits for the drain as before."""
        addr = self._broker_addrs.get(mq.broker_name)
        channel = None if addr is None else self._pool.open_channel(addr)
        if channel is None or channel._out().get_write_buffer_size() > _DRAIN_ABOVE_BYTES:
            return None
        if channel.binary:  # _start_single_request's common case inline: this runs once per send
            ext_bin, body, message_id = self._binary_headers.request(mq, message, producer_group, mq.queue_id)
            future = channel.start_binary_request(
                RequestCode.SEND_MESSAGE_V2, ext_bin, body, timeout_s=timeout_s
            )
            return future, message_id
        return self._start_single_request(channel, mq, message, producer_group, timeout_s)

    @staticmethod
    def send_result(mq: MessageQueue, message_id: str, response: RemotingCommand) -> SendResult:
        """The ``SendResult`` of a ``start_send_request`` to ``mq`` answered with ``response``."""
        return single.send_result(mq, message_id, response)

    async def send_oneway(self, mq: MessageQueue | None, message: Message, *, producer_group: str) -> None:
        target = mq or await self._any_mq(message.topic)
        code, ext, body, _ = self._send_request(
            target, [message], producer_group, -1 if mq is None else mq.queue_id
        )
        channel = await self._pool.get(await self._addr(target))
        await channel.oneway(code, ext, body)

    async def end_transaction(
        self, ref: TransactionRef, *, producer_group: str, commit: bool | None, from_check: bool
    ) -> None:
        """Oneway END_TRANSACTION, as 4.x clients send it; a lost one is repaired by check-back."""
        addr, ext = await self._end_request(ref, producer_group, commit, from_check)
        channel = await self._pool.get(addr)
        await channel.oneway(RequestCode.END_TRANSACTION, ext)

    def start_end_transaction(
        self, ref: TransactionRef, *, producer_group: str, commit: bool | None, from_check: bool
    ) -> bool:
        """``end_transaction`` without a coroutine when the topic's route is cached and its broker's
        connection open (the same broker ``end_transaction`` picks); False (nothing sent) otherwise."""
        addr = ref.broker_addr
        if addr is None:
            name = ref.broker_name
            if name is None:
                queues = self.cached_write_queues(ref.topic)
                if not queues:
                    return False
                name = queues[0].broker_name
            addr = self._broker_addrs.get(name)
        channel = None if addr is None else self._pool.open_channel(addr)
        if channel is None:
            return False
        try:
            if channel.binary:
                channel.start_binary_oneway(
                    RequestCode.END_TRANSACTION, _end_binary(ref, producer_group, commit, from_check)
                )
            else:
                channel.start_json_oneway(
                    RequestCode.END_TRANSACTION, _end_json(ref, producer_group, commit, from_check)
                )
        except TypeError:
            channel.start_oneway(
                RequestCode.END_TRANSACTION, _end_fields(ref, producer_group, commit, from_check)
            )
        return True

    async def end_transaction_acked(
        self, ref: TransactionRef, *, producer_group: str, commit: bool | None, from_check: bool
    ) -> None:
        """END_TRANSACTION as a request the broker answers once the decision is stored.

        A client that must know its decisions are stored before it moves on (the Spark sink's driver
        records a batch, then ends its halves) uses this instead of the oneway form.
        """
        addr, ext = await self._end_request(ref, producer_group, commit, from_check)
        await self._call_ok(addr, RequestCode.END_TRANSACTION, ext)

    async def _end_request(
        self, ref: TransactionRef, producer_group: str, commit: bool | None, from_check: bool
    ) -> tuple[str, dict[str, str]]:
        # the broker holding the half: the one that asked (a check), the one it was sent to, or (a
        # reference from elsewhere, naming neither) the topic's first
        if ref.broker_addr is not None:
            addr = ref.broker_addr
        elif ref.broker_name is not None:
            addr = await self._addr(MessageQueue(ref.topic, 0, ref.broker_name))
        else:
            addr = await self._addr(await self._any_mq(ref.topic))
        return addr, _end_fields(ref, producer_group, commit, from_check)

    # ---- offset consuming ---------------------------------------------------------------------------
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
        raw = await self.pull_raw(
            group, mq, offset, max_messages=max_messages, expression=expression,
            long_poll_ms=long_poll_ms, max_bytes=max_bytes,
        )  # fmt: skip
        messages: list[MessageView] = []
        if raw.status is PullStatus.FOUND:
            messages = conv.pulled_views(raw.body, conv.parse_tags(expression))
        return PullBatch(raw.status, messages, raw.next_offset, raw.min_offset, raw.max_offset)

    async def pull_raw(
        self,
        group: str,
        mq: MessageQueue,
        offset: int,
        *,
        max_messages: int,
        expression: str,
        long_poll_ms: int,
        max_bytes: int,
    ) -> RawPullBatch:
        """``pull`` with the response body left undecoded (records not yet filtered by tag): for readers
        that build their own rows from ``decode_pulled`` (the Spark source), not a ``Transport`` method."""
        flags = PULL_SUBSCRIPTION | (PULL_SUSPEND if long_poll_ms > 0 else 0)
        header = headers.PullMessageRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_messages, sys_flag=flags, commit_offset=0, suspend_timeout_millis=long_poll_ms,
            subscription=expression or "*", expression_type="TAG", max_msg_bytes=max_bytes,
        )  # fmt: skip
        timeout = long_poll_ms / 1000 + self.request_timeout_s
        response = await self._call(
            await self._addr(mq), RequestCode.PULL_MESSAGE, header.to_ext_fields(), timeout_s=timeout
        )
        status = _PULL_STATUS.get(response.code)  # type: ignore[call-overload]
        if status is None:
            raise error_for_response(response.code, response.remark)
        answer = headers.PullMessageResponseHeader.from_command(response)
        body = response.body if status is PullStatus.FOUND else b""
        return RawPullBatch(status, body, answer.next_begin_offset, answer.min_offset, answer.max_offset)

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None:
        # False: a group without an offset is None here (then consume_from decides), never the 0 a
        # broker gives a young queue when asked without it
        header = headers.QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, False)
        response = await self._call(
            await self._addr(mq), RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields()
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise error_for_response(response.code, response.remark)
        return headers.QueryConsumerOffsetResponseHeader.from_command(response).offset

    async def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        header = headers.UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset)
        await self._call_ok(await self._addr(mq), RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())

    async def resolve_offset(self, mq: MessageQueue, spec: OffsetSpec) -> int:
        addr = await self._addr(mq)
        if spec.kind == "beginning":
            ext = headers.GetMinOffsetRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
            response = await self._call_ok(addr, RequestCode.GET_MIN_OFFSET, ext)
        elif spec.kind == "end":
            ext = headers.GetMaxOffsetRequestHeader(mq.topic, mq.queue_id).to_ext_fields()
            response = await self._call_ok(addr, RequestCode.GET_MAX_OFFSET, ext)
        else:
            ext = headers.SearchOffsetRequestHeader(mq.topic, mq.queue_id, spec.timestamp_ms).to_ext_fields()
            response = await self._call_ok(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext)
        return int(response.ext_fields.get("offset", "0"))

    async def send_back(
        self, group: str, message: MessageView, *, delay_level: int, max_reconsume_times: int
    ) -> None:
        header = headers.ConsumerSendMsgBackRequestHeader(
            offset=message.commit_log_offset, group=group, delay_level=delay_level,
            origin_msg_id=message.message_id, origin_topic=message.topic,
            max_reconsume_times=max_reconsume_times,
        )  # fmt: skip
        addr = await self._addr(await self._any_mq(message.topic))
        await self._call_ok(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())

    async def consumer_ids(self, group: str, topic: str) -> list[str]:
        mq = (await self.route(topic, for_write=False))[0]
        ext = headers.GetConsumerListByGroupRequestHeader(group).to_ext_fields()
        response = await self._call_ok(await self._addr(mq), RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext)
        return sorted(bodies.ConsumerListBody.from_json(response.body).consumer_id_list)

    def _lock_body(self, group: str, mqs: Sequence[MessageQueue]) -> bytes:
        data = [bodies.MessageQueueData(mq.topic, mq.broker_name, mq.queue_id) for mq in mqs]
        return bodies.LockBatchRequestBody(group, self.client_id, data).to_json()

    async def lock_queues(self, group: str, mqs: Sequence[MessageQueue]) -> set[MessageQueue]:
        held: set[MessageQueue] = set()
        for broker_name in {mq.broker_name for mq in mqs}:
            mine = [mq for mq in mqs if mq.broker_name == broker_name]
            addr = await self._addr(mine[0])
            response = await self._call_ok(addr, RequestCode.LOCK_BATCH_MQ, {}, self._lock_body(group, mine))
            locked = bodies.LockBatchResponseBody.from_json(response.body).lock_ok_mq_set
            held |= {MessageQueue(q.topic, q.queue_id, broker_name) for q in locked}
        return held

    async def unlock_queues(self, group: str, mqs: Sequence[MessageQueue]) -> None:
        for broker_name in {mq.broker_name for mq in mqs}:
            mine = [mq for mq in mqs if mq.broker_name == broker_name]
            addr = await self._addr(mine[0])
            await self._call_ok(addr, RequestCode.UNLOCK_BATCH_MQ, {}, self._lock_body(group, mine))

    # ---- POP (not on remoting) ------------------------------------------------------------------------
    async def receive(
        self, group: str, topic: str, expression: str, *, max_messages: int, invisible_ms: int, wait_ms: int
    ) -> list[MessageView]:
        raise _no_pop()

    async def ack(self, group: str, message: MessageView) -> None:
        raise _no_pop()

    async def change_invisible_duration(
        self, group: str, message: MessageView, invisible_ms: int
    ) -> MessageView:
        raise _no_pop()


def _no_pop() -> errors.Unsupported:
    return errors.Unsupported(
        "receive/ack/change_invisible_duration (POP) are not served by txmq's remoting door; "
        "use transport='grpc' for a SimpleConsumer, or a PushConsumer/PullConsumer over remoting"
    )
