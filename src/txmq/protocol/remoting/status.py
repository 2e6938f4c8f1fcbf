"""The one mapping between txmq errors and remoting response codes (both directions).

The broker answers a failed request with ``response_code_for(exc)`` and ``str(exc)`` as the remark;
txmq's remoting client turns a non-success answer back into an error with ``error_for_response``.
Codes that are outcomes rather than failures (PULL_NOT_FOUND, PULL_OFFSET_MOVED, FLUSH_DISK_TIMEOUT,
the transaction states) are not errors and are handled by their callers.
"""

from __future__ import annotations

from typing import Final

from txmq.common import errors
from txmq.protocol.remoting.codes import ResponseCode

_TO_CODE: Final[dict[type[errors.TxmqError], ResponseCode]] = {
    errors.TopicNotFound: ResponseCode.TOPIC_NOT_EXIST,
    errors.GroupNotFound: ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    errors.NotFound: ResponseCode.QUERY_NOT_FOUND,
    errors.InvalidFilter: ResponseCode.SUBSCRIPTION_PARSE_FAILED,
    errors.InvalidArgument: ResponseCode.MESSAGE_ILLEGAL,
    errors.Forbidden: ResponseCode.NO_PERMISSION,
    errors.TooManyRequests: ResponseCode.SYSTEM_BUSY,
    errors.Unsupported: ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
    errors.StoreFenced: ResponseCode.SERVICE_NOT_AVAILABLE,
    errors.DiskFull: ResponseCode.SERVICE_NOT_AVAILABLE,
}

_TO_ERROR: Final[dict[int, type[errors.TxmqError]]] = {
    ResponseCode.TOPIC_NOT_EXIST: errors.TopicNotFound,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: errors.GroupNotFound,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: errors.GroupNotFound,
    ResponseCode.QUERY_NOT_FOUND: errors.NotFound,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: errors.InvalidFilter,
    ResponseCode.MESSAGE_ILLEGAL: errors.InvalidArgument,
    ResponseCode.NO_PERMISSION: errors.Forbidden,
    ResponseCode.SYSTEM_BUSY: errors.TooManyRequests,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: errors.Unsupported,
    ResponseCode.SERVICE_NOT_AVAILABLE: errors.ConnectionError_,
}


def response_code_for(exc: BaseException) -> ResponseCode:
    """The response code for an error raised while serving a request (SYSTEM_ERROR if unmapped)."""
    for cls in type(exc).__mro__:
        code = _TO_CODE.get(cls)
        if code is not None:
            return code
    return ResponseCode.SYSTEM_ERROR


def error_for_response(code: int, remark: str | None) -> errors.TxmqError:
    """The error a client raises for a non-success response ``code`` (``TxmqError`` if unmapped)."""
    cls = _TO_ERROR.get(code, errors.TxmqError)
    text = remark or f"remoting response code {code}"
    return cls(f"{text} (remoting code {code})")
