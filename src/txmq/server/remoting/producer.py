"""Producer requests: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320),
END_TRANSACTION (37)."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Coroutine
from typing import Any, Final, NamedTuple

from txmq.broker.send import HalfAppend, LaneAppend, LaneSent, SendContext, SendService, hex16
from txmq.common import errors, limits, msgid
from txmq.common import properties as props
from txmq.common.fastinit import tuple_maker
from txmq.common.message import LeanMessage, Message, SendResult
from txmq.protocol.remoting.codes import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    ResponseCode,
)
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.compression import COMPRESSED_FLAG, inflate
from txmq.protocol.remoting.frame import (
    encode_offset_answer,
    encode_send_response,
    encode_success_response,
)
from txmq.protocol.remoting.headers import EndTransactionRequestHeader, send_response_fields
from txmq.protocol.remoting.message_codec import decode_batch_entries
from txmq.protocol.remoting.send_header import SendFields, parse_send_fields
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.convert import lean_batch, to_lean, to_message
from txmq.server.remoting.status import error_response
from txmq.server.remoting_transport import Deferred, RemotingEndpoint

log = logging.getLogger(__name__)


def _is_batch(request: RemotingCommand, header: SendFields) -> bool:
    """Code 320, or ``batch`` set: "true" from Java, "1" from the C++ client (which batches with code 10)."""
    return header.batch or request.ext_fields.get("batch") == "1"


def _utf8(properties: str) -> bytes:
    """The header's properties as stored; a JSON header's ``\\ud800`` escape decodes to text that UTF-8
    cannot hold: an illegal message, not an internal error."""
    try:
        return properties.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise errors.InvalidArgument(
            f"the message properties are not valid text: {exc.reason} at character {exc.start}"
        ) from None


def _messages(header: SendFields, body: bytes, batch: bool) -> tuple[list[LeanMessage], list[Message]]:
    """The send lane's messages when every one is NORMAL or FIFO, else (none and) ``Message`` objects."""
    sys_flag = header.sys_flag
    if not batch:
        if sys_flag & COMPRESSED_FLAG:  # a 4.x client's body over 4 KiB: stored plain (compression.py)
            body = inflate(body, sys_flag)
        properties = props.decode(_utf8(header.properties)) if header.properties else {}
        lean = to_lean(body, properties, sys_flag)
        if lean is not None:
            return [lean], []
        return [], [to_message(header.topic, body, properties, sys_flag)]
    plain = lean_batch(body, sys_flag)  # a plain batch, read without a dict of properties per entry
    if plain is not None:
        return plain, []
    entries = decode_batch_entries(body)
    if not entries:
        raise errors.InvalidArgument("the batch is empty")
    lane: list[LeanMessage] = []
    for entry_body, properties, _ in entries:
        lean = to_lean(entry_body, properties, sys_flag)
        if lean is None:
            return [], [to_message(header.topic, b, p, sys_flag) for b, p, _ in entries]
        lane.append(lean)
    return lane, []


def send(
    ctx: RemotingContext, request: RemotingCommand, endpoint: RemotingEndpoint
) -> Deferred | Coroutine[Any, Any, RemotingCommand]:
    """Store one message or one atomic batch; answer with the offset message id(s) and queue position.

    A send-lane message (NORMAL/FIFO) is appended here, synchronously, and answered from a callback
    once its group is durable (ASYNC: written at the end of this loop turn): no task per request.
    Any other send (transactional, delayed) is a coroutine the transport runs as a task."""
    header = parse_send_fields(request)
    batch = _is_batch(request, header)
    text = header.properties
    if text and not batch and header.sys_flag & TRANSACTION_PREPARED_TYPE:
        half = _half_lane(ctx, request, header, text, endpoint)
        if half is not None:
            return half
    if _LANESCAN is not None and not header.sys_flag & TRANSACTION_PREPARED_TYPE:
        if batch:
            scanned = _scanned_batch(ctx, request, header, endpoint)
        elif not header.sys_flag & COMPRESSED_FLAG:
            scanned = _scanned_one(ctx, request, header, text or "", endpoint)
        else:
            scanned = None
        if scanned is not None:
            return scanned
    lane, messages = _messages(header, request.body, batch)
    context = _context(header.producer_group, endpoint.peer, header.queue_id)
    if not lane:
        if len(messages) == 1 and messages[0].transactional:
            return _send_half(ctx, request, messages[0], context)
        return _send_general(ctx, request, messages, context)
    if len(lane) > 1:
        return _send_batch(ctx, request, header.topic, lane, context)
    sender = ctx.broker.sender
    # shared: the transport only adds a done callback to ``durable`` (the handler's await shields it)
    appended = sender.lane_append(header.topic, lane, context, True)

    def answer(exc: Exception | None) -> RemotingCommand | bytes:
        if exc is not None:
            return error_response(request, exc)
        # one NORMAL/FIFO message (batches take _send_batch): no transaction id, no recall handle
        return _lane_answer(request, sender, appended)

    deferred: Deferred = _MAKE_DEFERRED(appended.durable, answer)  # no interpreted __new__
    return deferred


def _load_lanescan() -> Any:
    """The C scan of a plain batch body (``server/remoting/_lanescan.c``, built beside the mypyc
    modules) or None: not built, or ``TXMQ_PURE=1``. Without it every batch takes :func:`_messages`
    (``convert.lean_batch``) and ``SendService._lane_batch``, the reference it is held to."""
    try:
        return importlib.import_module("txmq.server.remoting._lanescan")
    except ImportError:
        return None


_LANESCAN: Any = _load_lanescan()


def _scanned_batch(
    ctx: RemotingContext, request: RemotingCommand, header: SendFields, endpoint: RemotingEndpoint
) -> Deferred | None:
    """A plain SEND_BATCH_MESSAGE (NORMAL messages, properties in ASCII) read by one C call straight
    into the send lane's columns (bodies, the records' properties, tags codes, index keys, ids) and
    appended by ``SendService.lane_columns``: the records and answer ``_messages`` and
    ``_send_batch`` give (tests/property/test_lane_scan.py). None, having changed nothing, for
    anything the scan or the lane declines: the caller then takes the general way."""
    context = _context(header.producer_group, endpoint.peer, header.queue_id)
    sender = ctx.broker.sender
    tail = sender.lane_tail(context.producer_group)
    if tail is None:
        return None
    scan = _LANESCAN.lane_scan(
        request.body, tail, limits.body_bytes_max, limits.tag_bytes_max, limits.keys_count_max,
        limits.key_bytes_max, limits.property_count_max, limits.properties_bytes_max,
    )  # fmt: skip
    if scan is None:
        return None
    started = sender.lane_columns(header.topic, scan, context)
    if started is None:
        return None
    sent, durable = started

    def answer(exc: Exception | None) -> RemotingCommand | bytes:
        if exc is not None:
            return error_response(request, exc)
        return _batch_response(request, sent)

    deferred: Deferred = _MAKE_DEFERRED(durable, answer)
    return deferred


def _scanned_one(
    ctx: RemotingContext, request: RemotingCommand, header: SendFields, text: str, endpoint: RemotingEndpoint
) -> Deferred | None:
    """A plain single SEND_MESSAGE(_V2) (a NORMAL message, properties in ASCII) read by one C call
    (``_lanescan.one_scan``) into the lane's columns of one message and appended by
    ``SendService.lane_one``: the record and answer of ``_messages`` + ``lane_append``, without the
    properties' dict and its encoding (tests/property/test_lane_scan.py). A message without an id
    (as some 4.x clients send) gets the one ``lane_append`` makes, by ``_lanescan.keyless_fill``
    after the lane's clock reading. None, having changed nothing, for anything the scan or the lane
    declines: the caller then takes the general way."""
    context = _context(header.producer_group, endpoint.peer, header.queue_id)
    sender = ctx.broker.sender
    tail = sender.lane_tail(context.producer_group)
    if tail is None:
        return None
    scan = _LANESCAN.one_scan(
        request.body, text, tail, limits.body_bytes_max, limits.tag_bytes_max, limits.keys_count_max,
        limits.key_bytes_max, limits.property_count_max, limits.properties_bytes_max, True,
    )  # fmt: skip
    if scan is None:
        return None
    appended = sender.lane_one(header.topic, scan, context, True, _LANESCAN.keyless_fill, tail)
    if appended is None:
        return None

    def answer(exc: Exception | None) -> RemotingCommand | bytes:
        if exc is not None:
            return error_response(request, exc)
        return _lane_answer(request, sender, appended)

    deferred: Deferred = _MAKE_DEFERRED(appended.durable, answer)
    return deferred


def _lane_answer(request: RemotingCommand, sender: SendService, appended: LaneAppend) -> bytes:
    """A one-message lane append's answer frame: ``sender.lane_answer`` rendered by
    ``encode_send_response``, or the same bytes by one C call (``frame.encode_offset_answer``)."""
    prefix, physical_offset, queue_id, queue_offset = sender.lane_answer_parts(appended)
    data = encode_offset_answer(request, prefix, physical_offset, queue_id, queue_offset)
    if data is None:
        data = encode_send_response(request, prefix + hex16(physical_offset), queue_id, queue_offset)
    return data


def _batch_response(request: RemotingCommand, sent: LaneSent) -> RemotingCommand:
    """A lane batch's answer: its offset ids and message ids joined, the first queue position."""
    fields = send_response_fields(
        ",".join(sent.offset_ids), sent.queue_ids[0], sent.queue_offsets[0], None, ",".join(sent.message_ids)
    )
    return make_response(request, ResponseCode.SUCCESS, ext_fields=fields)


def _half_lane(
    ctx: RemotingContext, request: RemotingCommand, header: SendFields, text: str, endpoint: RemotingEndpoint
) -> Deferred | None:
    """A 4.x half (TRANSACTION_PREPARED, one message) appended from its decoded properties, no
    ``Message`` (``SendService.half_lane_append``); None when that declines it (nothing done, the
    general path judges it). Body and properties are read as ``_messages`` reads them, same errors."""
    body = request.body
    if header.sys_flag & COMPRESSED_FLAG:
        body = inflate(body, header.sys_flag)
    properties = props.decode(_utf8(text))
    context = _context(header.producer_group, endpoint.peer, header.queue_id)
    sender = ctx.broker.sender
    half = sender.half_lane_append(header.topic, body, properties, context)
    return None if half is None else _half_answered(request, sender, half)


def _send_half(
    ctx: RemotingContext, request: RemotingCommand, message: Message, context: SendContext
) -> Deferred:
    """A half message: appended here, answered from a callback once durable (no task), as
    ``broker.send`` would answer it."""
    sender = ctx.broker.sender
    return _half_answered(request, sender, sender.half_append(message, context))


def _half_answered(request: RemotingCommand, sender: SendService, half: HalfAppend) -> Deferred:
    """The answer of an appended half, rendered once its record is durable."""

    def answer(exc: Exception | None) -> RemotingCommand | bytes:
        if exc is not None:
            return error_response(request, exc)
        # pre-rendered as the lane's answer: a half's msgId and transactionId are its offset id
        offset_id, queue_id = sender.half_answer_fields(half)
        return encode_send_response(request, offset_id, queue_id, 0, offset_id)

    deferred: Deferred = _MAKE_DEFERRED(half.durable, answer)
    return deferred


async def _send_batch(
    ctx: RemotingContext, request: RemotingCommand, topic: str, lane: list[LeanMessage], context: SendContext
) -> RemotingCommand:
    """A lane batch (SEND_BATCH_MESSAGE): appended column by column, answered from the columns."""
    return _batch_response(request, await ctx.broker.send_lean_batch(topic, lane, context))


async def _send_general(
    ctx: RemotingContext, request: RemotingCommand, messages: list[Message], context: SendContext
) -> RemotingCommand:
    results = await ctx.broker.send(messages, context)
    return make_response(request, ResponseCode.SUCCESS, ext_fields=_response_fields(results))


# peer -> producer group -> queue id -> context (three lookups by str, str and int: no tuple key to
# build and hash per request); _CONTEXT_COUNT[0] contexts kept, up to _CONTEXTS_MAX
_CONTEXTS: Final[dict[str, dict[str, dict[int, SendContext]]]] = {}
_CONTEXT_COUNT: Final = [0]
_CONTEXTS_MAX: Final = 4096


def _context(producer_group: str, peer: str, queue_id: int) -> SendContext:
    """The send's context; a frozen value, shared by every send with the same three fields (a
    producer repeats them on every request)."""
    groups = _CONTEXTS.get(peer)
    if groups is not None:
        queues = groups.get(producer_group)
        if queues is not None:
            context = queues.get(queue_id)
            if context is not None:
                return context
    return _new_context(producer_group, peer, queue_id)


def _new_context(producer_group: str, peer: str, queue_id: int) -> SendContext:
    context = SendContext(
        producer_group=producer_group or None,
        born_host=peer,
        queue_id=queue_id if queue_id >= 0 else None,
    )
    if _CONTEXT_COUNT[0] >= _CONTEXTS_MAX:
        _CONTEXTS.clear()
        _CONTEXT_COUNT[0] = 0
    _CONTEXTS.setdefault(peer, {}).setdefault(producer_group, {})[queue_id] = context
    _CONTEXT_COUNT[0] += 1
    return context


def _response_fields(results: list[SendResult]) -> dict[str, str]:
    first = results[0]
    if len(results) == 1:
        msg_id = first.offset_message_id or first.message_id
        queue_id, offset = first.queue.queue_id, first.queue_offset
        return send_response_fields(msg_id, queue_id, offset, first.transaction_id, None, first.recall_handle)
    return send_response_fields(
        ",".join(r.offset_message_id or r.message_id for r in results),
        first.queue.queue_id,
        first.queue_offset,
        first.transaction_id,
        ",".join(r.message_id for r in results),
        first.recall_handle,
    )


class EndFields(NamedTuple):
    """What END_TRANSACTION's handler reads of its header (``topic`` and ``transaction_id``: "" when
    absent)."""

    commit_or_rollback: int
    commit_log_offset: int
    msg_id: str
    topic: str
    from_check: bool
    transaction_id: str


def _plain_int(raw: str) -> bool:
    """ASCII digits only, at most 18 of them: what ``headers._parse_int`` takes without question."""
    return 0 < len(raw) <= 18 and raw.isascii() and raw.isdecimal()


def end_fields(ext: dict[str, str]) -> EndFields | None:
    """END_TRANSACTION's header read straight from its fields when every required one is present
    and its numbers are plain digits, else None (then ``EndTransactionRequestHeader`` reads it):
    the values ``EndTransactionRequestHeader.from_ext_fields`` gives (tests/property/test_end_fields.py)."""
    table_offset = ext.get("tranStateTableOffset")
    offset = ext.get("commitLogOffset")
    decision = ext.get("commitOrRollback")
    msg_id = ext.get("msgId")
    if (
        "producerGroup" not in ext
        or table_offset is None
        or offset is None
        or decision is None
        or msg_id is None
        or not (_plain_int(table_offset) and _plain_int(offset) and _plain_int(decision))
    ):
        return None
    check = ext.get("fromTransactionCheck")
    fields: EndFields = _MAKE_END_FIELDS(
        int(decision), int(offset), msg_id, ext.get("topic") or "",
        check is not None and check.lower() == "true", ext.get("transactionId") or "",
    )  # fmt: skip
    return fields


_NO_ANSWER: Final = b""  # what a oneway request's answer callback returns (RemotingEndpoint._answer drops it)

_DECISIONS: Final[dict[int, bool | None]] = {
    TRANSACTION_COMMIT_TYPE: True,
    TRANSACTION_ROLLBACK_TYPE: False,
    TRANSACTION_NOT_TYPE: None,
}


def end_transaction(
    ctx: RemotingContext, request: RemotingCommand, endpoint: RemotingEndpoint
) -> RemotingCommand | Deferred | Coroutine[Any, Any, RemotingCommand | None] | None:
    """Commit, roll back or report "unknown"; 4.x sends it oneway, so failures are only logged then.

    Called from the read callback: the decision is appended here and answered from a callback once
    durable (no task), unless another decision on the same half holds its turn (then a coroutine)."""
    fields = end_fields(request.ext_fields)
    if fields is None:  # anything unusual: the header class reads it and words every error
        header = EndTransactionRequestHeader.from_command(request)
        fields = _MAKE_END_FIELDS(
            header.commit_or_rollback, header.commit_log_offset, header.msg_id, header.topic or "",
            header.from_transaction_check, header.transaction_id or "",
        )  # fmt: skip
    if fields.commit_or_rollback not in _DECISIONS:
        raise errors.InvalidArgument(f"commitOrRollback {fields.commit_or_rollback} is not 0, 8 or 12")
    decision = _DECISIONS[fields.commit_or_rollback]
    transaction_id = fields.transaction_id
    transactions = ctx.broker.transactions
    half_offset = transactions.kept_half_offset(transaction_id)  # a kept half's id: no parse
    if half_offset < 0:
        parsed = msgid.parse_offset_message_id(transaction_id)
        if parsed is None:
            # the Java client sends its own id here; the half message's commit-log offset is authoritative
            transaction_id = transactions.transaction_id_of(fields.commit_log_offset)
        else:
            half_offset = parsed[2]  # what the service would parse out of transaction_id again
    try:
        # the service's own call (Broker.end_transaction_nowait is an interpreted keyword call to it)
        started = transactions.end_nowait(
            topic=fields.topic, message_id=fields.msg_id, transaction_id=transaction_id,
            commit=decision, from_check=fields.from_check, client_id=endpoint.peer, half_offset=half_offset,
        )  # fmt: skip
    except errors.TxmqError as exc:
        return _end_failed(request, endpoint, transaction_id, exc)
    if started is None:  # decided before: nothing to store
        return None if request.is_oneway else make_response(request, ResponseCode.SUCCESS)
    if type(started) is not tuple and isinstance(started, Coroutine):  # a tuple: no ABC isinstance
        return _end_later(request, endpoint, transaction_id, started)
    durable, finish = started

    def answer(exc: Exception | None) -> RemotingCommand | bytes:
        try:
            finish(exc)
        except errors.TxmqError as failure:
            response = _end_failed(request, endpoint, transaction_id, failure)
            return response if response is not None else make_response(request, ResponseCode.SUCCESS)
        except Exception as failure:  # noqa: BLE001 - mapped to a response code in one place
            return error_response(request, failure)
        # a oneway END (4.x clients, txmq's SDK) is never answered: the transport drops what this returns
        return _NO_ANSWER if request.is_oneway else encode_success_response(request)

    deferred: Deferred = _MAKE_DEFERRED(durable, answer)
    return deferred


def _end_failed(
    request: RemotingCommand, endpoint: RemotingEndpoint, transaction_id: str, exc: errors.TxmqError
) -> RemotingCommand | None:
    """A refused decision: logged when oneway (nobody reads the answer), else its error response."""
    if request.is_oneway:
        log.warning("END_TRANSACTION %s from %s failed: %s", transaction_id, endpoint.peer, exc.message)
        return None
    return error_response(request, exc)


async def _end_later(
    request: RemotingCommand,
    endpoint: RemotingEndpoint,
    transaction_id: str,
    pending: Coroutine[Any, Any, None],
) -> RemotingCommand | None:
    """A decision that waits for another one on the same half to finish first."""
    try:
        await pending
    except errors.TxmqError as exc:
        return _end_failed(request, endpoint, transaction_id, exc)
    return make_response(request, ResponseCode.SUCCESS)


# NamedTuples made per message by one C call each (fastinit.tuple_maker: tuple.__new__'s object without
# the class's interpreted __new__ and without an argument tuple); Final: compiled code reads C statics
_MAKE_DEFERRED: Final = tuple_maker(Deferred)
_MAKE_END_FIELDS: Final = tuple_maker(EndFields)
