"""MessagingService handlers whose request decoding cannot fail with an internal error.

The generated ``add_MessagingServiceServicer_to_server`` parses requests with ``FromString``; a body
that is not valid protobuf (garbage, a truncation, invalid UTF-8 in a string field) makes grpc answer
``UNKNOWN`` with "Unexpected DecodeError" and log a traceback, which reads as a broker bug. Here the
same handlers are built from the service descriptor with a deserializer that returns a
:class:`Malformed` marker instead of raising, and the call is answered with the RPC's own response
type carrying ``BAD_REQUEST`` and the decoder's reason - the v2 protocol's way to reject a request.
A handler may also answer with its response already serialized (``bytes``): it is sent as is.

SendMessage is handed its request's bytes (no deserializer, :data:`RAW_REQUEST`, when ``wire`` runs
compiled): the door decodes the common request straight into the send lane (``wire.send_lane``) and
anything else with :func:`parse_send` - the same protobuf decode, a :class:`Malformed` as for every
other RPC.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from txmq.common import errors
from txmq.protocol.grpc import pb, wire
from txmq.protocol.grpc.status import status_of

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"


@dataclass(frozen=True)
class Malformed:
    """A request body that did not decode."""

    reason: str


def _parser(cls: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except (DecodeError, ValueError) as exc:
            return Malformed(f"malformed {cls.DESCRIPTOR.name}: {exc}")

    return parse


# handed the request's bytes; only with wire compiled: pure Python, send_lane costs ~3x what protobuf's
# parse plus convert.to_lean cost (~9 vs ~3 µs per 1 KB message)
RAW_REQUEST = frozenset() if wire.__file__.endswith(".py") else frozenset({"SendMessage"})


def parse_send(data: bytes) -> Any:
    """A SendMessageRequest from ``data``, or :class:`Malformed` (the other RPCs' deserializer)."""
    return _parse_send(data)


def _serializer(cls: Any) -> Callable[[Any], bytes]:
    """``cls.SerializeToString``, except that a handler may answer with the response already
    serialized (``bytes``, from :mod:`txmq.protocol.grpc.wire`), which is passed through."""
    serialize = cls.SerializeToString

    def serializer(response: Any) -> bytes:
        if response.__class__ is bytes:
            return response
        return serialize(response)  # type: ignore[no-any-return]

    return serializer


def _rejection(response_cls: Any, malformed: Malformed) -> Any:
    """The RPC's response carrying BAD_REQUEST (Telemetry's command has the same ``status`` field)."""
    return response_cls(status=status_of(errors.InvalidArgument(malformed.reason)))


def _unary_unary(fn: Any, response_cls: Any) -> Any:
    async def call(request: Any, context: Any) -> Any:
        if isinstance(request, Malformed):
            return _rejection(response_cls, request)
        return await fn(request, context)

    return call


def _unary_stream(fn: Any, response_cls: Any) -> Any:
    async def call(request: Any, context: Any) -> AsyncIterator[Any]:
        if isinstance(request, Malformed):
            yield _rejection(response_cls, request)
            return
        async for response in fn(request, context):
            yield response

    return call


def _stream_stream(fn: Any, response_cls: Any) -> Any:
    async def call(request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        rejected: list[Malformed] = []

        async def requests() -> AsyncIterator[Any]:
            async for request in request_iterator:
                if isinstance(request, Malformed):  # end the client's half here; answer below
                    rejected.append(request)
                    return
                yield request

        async for response in fn(requests(), context):
            yield response
        if rejected:
            yield _rejection(response_cls, rejected[0])

    return call


def messaging_handler(servicer: Any) -> grpc.GenericRpcHandler:
    """A generic handler for every MessagingService RPC of ``servicer`` with tolerant decoding."""
    from google.protobuf import message_factory

    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in pb.service.DESCRIPTOR.services_by_name["MessagingService"].methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        fn = getattr(servicer, method.name)
        options: dict[str, Any] = {
            "request_deserializer": None if method.name in RAW_REQUEST else _parser(request_cls),
            "response_serializer": _serializer(response_cls),
        }
        if method.client_streaming and method.server_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _stream_stream(fn, response_cls), **options
            )
        elif method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _unary_stream(fn, response_cls), **options
            )
        elif method.client_streaming:
            raise AssertionError(f"{method.name}: client-streaming RPCs are not part of the v2 protocol")
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                fn if method.name in RAW_REQUEST else _unary_unary(fn, response_cls), **options
            )
    return grpc.method_handlers_generic_handler(SERVICE_NAME, handlers)


_parse_send = _parser(pb.service.SendMessageRequest)
