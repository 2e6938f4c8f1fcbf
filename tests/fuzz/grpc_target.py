"""A whole broker (gRPC, remoting, embedded name server, background services) on its own event loop in
a thread, so synchronous hypothesis tests can hammer its sockets; and the generic, untyped calls the
fuzzers make (identity serializers: the request body is whatever bytes the fuzzer chose)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from tests.conftest import free_port
from txmq.broker.config import BrokerConfig
from txmq.common import errors
from txmq.protocol.grpc import pb
from txmq.server.runtime import RunningBroker, start_broker
from txmq.storage.api import FlushMode

SERVICE = "apache.rocketmq.v2.MessagingService"
METHODS = list(pb.service.DESCRIPTOR.services_by_name["MessagingService"].methods)
BAD_V2_CODES = {errors.INTERNAL_ERROR, errors.INTERNAL_SERVER_ERROR}
# gRPC-level codes a hostile request may legitimately get; INTERNAL/UNKNOWN mean a handler blew up
FINE_GRPC_CODES = {
    grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNIMPLEMENTED,
}  # fmt: skip


@dataclass
class FuzzFigures:
    """What the fuzzers did, printed at the end of the module."""

    inputs: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    v2_codes: Counter[int] = field(default_factory=Counter)

    def line(self) -> str:
        return (
            f"fuzz inputs={sum(self.inputs.values())} {dict(self.inputs)} crashes={len(self.crashes)} "
            f"distinct v2 codes={len(self.v2_codes)}"
        )


class BrokerThread:
    def __init__(self, root: Path) -> None:
        self.config = BrokerConfig(
            data_dir=str(root / "data"), grpc_port=free_port(), remoting_port=free_port(),
            namesrv_port=free_port(), flush=FlushMode.SYNC, segment_bytes=1024 * 1024,
        )  # fmt: skip
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.running: RunningBroker | None = None

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.config.grpc_port}"

    def run(self, coro: Any, timeout: float = 30) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def start(self) -> None:
        self.thread.start()
        self.running = self.run(start_broker(self.config))

    def stop(self) -> None:
        if self.running is not None:
            self.run(self.running.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _identity(data: bytes) -> bytes:
    return data


def call(
    channel: grpc.Channel, method: Any, payload: bytes, *, client_id: str | None, timeout_s: float
) -> tuple[grpc.StatusCode, list[bytes], str]:
    """One raw call of ``method`` with ``payload`` as the serialized request: (code, responses, details)."""
    path = f"/{SERVICE}/{method.name}"
    metadata = [("x-mq-client-id", client_id)] if client_id else []
    kw: dict[str, Any] = {"request_serializer": _identity, "response_deserializer": _identity}
    try:
        if method.client_streaming:
            stream = channel.stream_stream(path, **kw)(iter([payload]), timeout=timeout_s, metadata=metadata)
            return grpc.StatusCode.OK, list(stream), ""
        if method.server_streaming:
            return (
                grpc.StatusCode.OK,
                list(channel.unary_stream(path, **kw)(payload, timeout=timeout_s, metadata=metadata)),
                "",
            )
        return (
            grpc.StatusCode.OK,
            [channel.unary_unary(path, **kw)(payload, timeout=timeout_s, metadata=metadata)],
            "",
        )
    except grpc.RpcError as exc:
        return exc.code(), [], str(exc.details())


def judge(
    figures: FuzzFigures, method: Any, payload: bytes, result: tuple[grpc.StatusCode, list[bytes], str]
) -> None:
    """Record a crash when the broker answered INTERNAL/UNKNOWN or a v2 internal-error status."""
    code, responses, details = result
    figures.inputs[method.name] += 1
    if code not in FINE_GRPC_CODES:
        figures.crashes.append(f"{method.name}: gRPC {code.name} {details!r} for {payload[:64]!r}")
        return
    response_class = message_class(method.output_type)
    for raw in responses:
        response = response_class.FromString(raw)
        if response.HasField("status"):
            figures.v2_codes[response.status.code] += 1
            if response.status.code in BAD_V2_CODES:
                figures.crashes.append(
                    f"{method.name}: v2 {response.status.code} {response.status.message!r}"
                )


def message_class(descriptor: Any) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


def alive(channel: grpc.Channel, nonce: str) -> bool:
    """A normal send, then a receive of exactly that message: the broker still serves."""
    S = pb.service
    topic, body = pb.Resource(name="alive"), f"alive-{nonce}".encode()
    sysp = pb.SystemProperties(message_id=f"ALIVE{nonce}", message_type=pb.MessageType.NORMAL)
    metadata = [("x-mq-client-id", f"alive-{nonce}")]
    send = channel.unary_unary(
        f"/{SERVICE}/SendMessage",
        request_serializer=_ser,
        response_deserializer=S.SendMessageResponse.FromString,
    )
    sent = send(S.SendMessageRequest(messages=[pb.Message(topic=topic, body=body, system_properties=sysp)]),
                timeout=10, metadata=metadata)  # fmt: skip
    if sent.status.code != errors.OK:
        return False
    receive = channel.unary_stream(
        f"/{SERVICE}/ReceiveMessage", request_serializer=_ser,
        response_deserializer=S.ReceiveMessageResponse.FromString,
    )  # fmt: skip
    request = S.ReceiveMessageRequest(
        group=pb.Resource(name=f"alive-{nonce}"), message_queue=pb.MessageQueue(topic=topic),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=32,
    )  # fmt: skip
    request.invisible_duration.seconds = 30
    request.long_polling_timeout.seconds = 2
    for _ in range(5):
        for response in receive(request, timeout=10, metadata=metadata):
            if response.HasField("message") and response.message.body == body:
                return True
    return False


def _ser(message: Any) -> bytes:
    return bytes(message.SerializeToString())
