"""The operator door: one gRPC method ``/txmq.Admin/Call`` carrying JSON, next to MessagingService.

Request ``{"op": "topic.create", "args": {...}}``; reply ``{"ok": true, "result": ...}`` or
``{"ok": false, "code": <v2 code>, "error": "<message>"}``. The operations are in
:mod:`txmq.broker.admin`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import grpc

from txmq.broker import admin
from txmq.broker.broker import Broker
from txmq.common import errors

log = logging.getLogger(__name__)
METHOD = "/txmq.Admin/Call"


def _identity(data: bytes) -> bytes:
    return data


async def _call(broker: Broker, request: bytes) -> bytes:
    reply: dict[str, Any]
    try:
        doc = json.loads(request.decode("utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("op"), str):
            raise errors.InvalidArgument('an admin request is {"op": "...", "args": {...}}')
        result = await admin.dispatch(broker, doc["op"], doc.get("args") or {})
        reply = {"ok": True, "result": result}
    except errors.TxmqError as exc:
        reply = {"ok": False, "code": exc.code, "error": exc.message}
    except (ValueError, TypeError) as exc:
        reply = {"ok": False, "code": errors.BAD_REQUEST, "error": f"bad admin request: {exc}"}
    except Exception as exc:
        log.exception("admin operation failed")
        reply = {"ok": False, "code": errors.INTERNAL_SERVER_ERROR, "error": f"internal error: {exc}"}
    return json.dumps(reply, default=str).encode("utf-8")


def admin_handler(broker: Broker) -> grpc.GenericRpcHandler:
    async def call(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return await _call(broker, request)

    handler = grpc.unary_unary_rpc_method_handler(
        call, request_deserializer=_identity, response_serializer=_identity
    )
    return grpc.method_handlers_generic_handler("txmq.Admin", {"Call": handler})
