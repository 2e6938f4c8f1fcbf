"""Producer requests: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320),
END_TRANSACTION (37)."""

from __future__ import annotations

import logging

from txmq.broker.send import SendContext
from txmq.common import errors, msgid
from txmq.common import properties as props
from txmq.common.message import LeanMessage, Message, SendResult
from txmq.protocol.remoting.codes import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    ResponseCode,
)
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.headers import (
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    parse_send_header,
    send_response_fields,
)
from txmq.protocol.remoting.message_codec import decode_batch_entries
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.convert import to_lean, to_message
from txmq.server.remoting_transport import RemotingEndpoint

log = logging.getLogger(__name__)


def _is_batch(request: RemotingCommand, header: SendMessageRequestHeader) -> bool:
    """Code 320, or ``batch`` set: "true" from Java, "1" from the C++ client (which batches with code 10)."""
    return header.batch or request.ext_fields.get("batch") == "1"


def _messages(
    header: SendMessageRequestHeader, body: bytes, batch: bool
) -> tuple[list[LeanMessage], list[Message]]:
    """The send lane's messages when every one is NORMAL or FIFO, else (none and) ``Message`` objects."""
    sys_flag = header.sys_flag
    if not batch:
        properties = props.decode(header.properties.encode("utf-8")) if header.properties else {}
        lean = to_lean(body, properties, sys_flag)
        if lean is not None:
            return [lean], []
        return [], [to_message(header.topic, body, properties, sys_flag)]
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


async def send(ctx: RemotingContext, request: RemotingCommand, endpoint: RemotingEndpoint) -> RemotingCommand:
    """Store one message or one atomic batch; answer with the offset message id(s) and queue position."""
    header = parse_send_header(request)
    lane, messages = _messages(header, request.body, _is_batch(request, header))
    context = _context(header.producer_group, endpoint.peer, header.queue_id)
    if lane:
        results = await ctx.broker.send_lean(header.topic, lane, context)
    else:
        results = await ctx.broker.send(messages, context)
    return make_response(request, ResponseCode.SUCCESS, ext_fields=_response_fields(results))


_CONTEXTS: dict[tuple[str, str, int], SendContext] = {}
_CONTEXTS_MAX = 4096


def _context(producer_group: str, peer: str, queue_id: int) -> SendContext:
    """The send's context; a frozen value, shared by every send with the same three fields (a
    producer repeats them on every request)."""
    key = (producer_group, peer, queue_id)
    context = _CONTEXTS.get(key)
    if context is None:
        context = SendContext(
            producer_group=producer_group or None,
            born_host=peer,
            queue_id=queue_id if queue_id >= 0 else None,
        )
        if len(_CONTEXTS) >= _CONTEXTS_MAX:
            _CONTEXTS.clear()
        _CONTEXTS[key] = context
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


_DECISIONS: dict[int, bool | None] = {
    TRANSACTION_COMMIT_TYPE: True,
    TRANSACTION_ROLLBACK_TYPE: False,
    TRANSACTION_NOT_TYPE: None,
}


async def end_transaction(
    ctx: RemotingContext, request: RemotingCommand, endpoint: RemotingEndpoint
) -> RemotingCommand | None:
    """Commit, roll back or report "unknown"; 4.x sends it oneway, so failures are only logged then."""
    header = EndTransactionRequestHeader.from_command(request)
    if header.commit_or_rollback not in _DECISIONS:
        raise errors.InvalidArgument(f"commitOrRollback {header.commit_or_rollback} is not 0, 8 or 12")
    decision = _DECISIONS[header.commit_or_rollback]
    transaction_id = header.transaction_id or ""
    if msgid.parse_offset_message_id(transaction_id) is None:
        # the Java client sends its own id here; the half message's commit-log offset is authoritative
        transaction_id = ctx.broker.transactions.transaction_id_of(header.commit_log_offset)
    try:
        await ctx.broker.end_transaction(
            topic=header.topic or "", message_id=header.msg_id, transaction_id=transaction_id,
            commit=decision,
            from_check=header.from_transaction_check, client_id=endpoint.peer,
        )  # fmt: skip
    except errors.TxmqError as exc:
        if request.is_oneway:
            log.warning("END_TRANSACTION %s from %s failed: %s", transaction_id, endpoint.peer, exc.message)
            return None
        raise
    return make_response(request, ResponseCode.SUCCESS)
