"""The single place where an exception becomes an apache.rocketmq.v2 ``Status``.

A :class:`TxmqError` carries its v2 code and a message a person can act on; anything else is a bug in
txmq, answered as INTERNAL_SERVER_ERROR and logged with its traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from txmq.common import errors
from txmq.protocol.grpc import pb

log = logging.getLogger(__name__)


def status_of(exc: BaseException) -> Any:
    if isinstance(exc, errors.TxmqError):
        return pb.Status(code=exc.code, message=exc.message or type(exc).__name__)
    log.error("internal error while serving a gRPC call", exc_info=exc)
    return pb.Status(
        code=errors.INTERNAL_SERVER_ERROR, message=f"internal error: {type(exc).__name__}: {exc}"
    )
