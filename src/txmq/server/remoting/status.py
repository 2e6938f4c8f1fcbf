"""The one place where txmq errors become remoting response codes (with the error message as remark)."""

from __future__ import annotations

import logging

from txmq.common import errors
from txmq.protocol.remoting.codes import ResponseCode
from txmq.protocol.remoting.command import RemotingCommand, make_response

log = logging.getLogger(__name__)

# Most specific first: the first class the error is an instance of decides.
_CODES: tuple[tuple[type[errors.TxmqError], ResponseCode], ...] = (
    (errors.TopicNotFound, ResponseCode.TOPIC_NOT_EXIST),
    (errors.GroupNotFound, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
    (errors.MessageNotFound, ResponseCode.QUERY_NOT_FOUND),
    (errors.OffsetNotFound, ResponseCode.QUERY_NOT_FOUND),
    (errors.NotFound, ResponseCode.QUERY_NOT_FOUND),
    (errors.Forbidden, ResponseCode.NO_PERMISSION),
    (errors.InvalidFilter, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
    (errors.InvalidTransactionId, ResponseCode.SYSTEM_ERROR),
    (errors.InvalidOffset, ResponseCode.SYSTEM_ERROR),
    (errors.InvalidArgument, ResponseCode.MESSAGE_ILLEGAL),
    (errors.Conflict, ResponseCode.TRANSACTION_FAILED),
    (errors.TooManyRequests, ResponseCode.SYSTEM_BUSY),
    (errors.RequestTimeout, ResponseCode.SYSTEM_BUSY),
    (errors.Unsupported, ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
    (errors.StoreFenced, ResponseCode.SERVICE_NOT_AVAILABLE),
    (errors.DiskFull, ResponseCode.SERVICE_NOT_AVAILABLE),
)


def code_for(exc: errors.TxmqError) -> ResponseCode:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return ResponseCode.SYSTEM_ERROR


def error_response(request: RemotingCommand, exc: Exception) -> RemotingCommand:
    """The answer to ``request`` that failed with ``exc`` (unexpected errors are logged, not shown)."""
    if isinstance(exc, errors.TxmqError):
        log.debug("remoting request code %d refused: %s", request.code, exc.message)
        return make_response(request, code_for(exc), exc.message)
    log.exception("remoting request code %d failed", request.code, exc_info=exc)
    return make_response(request, ResponseCode.SYSTEM_ERROR, f"internal error: {type(exc).__name__}")
