"""A tiny blocking client for the broker's admin method (used by the operator commands)."""

from __future__ import annotations

import json
from typing import Any

import grpc

from txmq.common import errors

METHOD = "/txmq.Admin/Call"


def call(endpoint: str, op: str, args: dict[str, Any] | None = None, *, timeout_s: float = 10.0) -> Any:
    """Run one admin operation on the broker at ``endpoint`` (its gRPC host:port)."""
    with grpc.insecure_channel(endpoint) as channel:
        stub = channel.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        request = json.dumps({"op": op, "args": args or {}}).encode("utf-8")
        try:
            raw = stub(request, timeout=timeout_s)
        except grpc.RpcError as exc:
            raise errors.ConnectionError_(f"cannot reach the broker at {endpoint}: {exc.details()}") from None
    reply = json.loads(raw)
    if not reply.get("ok"):
        cls = errors.for_code(int(reply.get("code", errors.INTERNAL_ERROR)))
        raise cls(str(reply.get("error", "unknown error")))
    return reply.get("result")
