"""Bounds at the edge under load: beyond ``connections_max`` a remoting connection is answered SYSTEM_BUSY
(TOO_MANY_REQUESTS) and closed while the others keep being served; beyond ``grpc_concurrent_rpcs_max``
a gRPC call gets RESOURCE_EXHAUSTED; both recover when load drops. (RSS under a slow consumer, a
million pending messages and thousands of connections: ``benchmarks/limits_bench.py``.)"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.fuzz.grpc_target import SERVICE, BrokerThread
from txmq.common import errors
from txmq.protocol.grpc import pb
from txmq.protocol.remoting.codes import RequestCode, ResponseCode
from txmq.protocol.remoting.connection import NEED_DATA, RemotingConnection, Response

CONNECTIONS_MAX = 20
RPCS_MAX = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    target = BrokerThread(Path(tmp_path_factory.mktemp("limits")))
    target.config = dataclasses.replace(
        target.config, connections_max=CONNECTIONS_MAX, grpc_concurrent_rpcs_max=RPCS_MAX
    )
    target.start()
    yield target
    target.stop()


class _Conn:
    """A blocking remoting connection that asks for a route and returns the answer's code."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn = RemotingConnection()

    def route(self) -> tuple[int | None, str]:
        cmd = self.conn.new_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "limits"})
        try:
            self.sock.sendall(self.conn.send(cmd))
            while data := self.sock.recv(65536):
                self.conn.receive_data(data)
                while (event := self.conn.next_event()) is not NEED_DATA:
                    if isinstance(event, Response):
                        return event.command.code, event.command.remark or ""
        except OSError:
            pass
        return None, "closed"

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True

    def close(self) -> None:
        self.sock.close()


def _until(predicate: Any, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout_s}s")
        time.sleep(0.02)


def test_remoting_connections_beyond_the_limit_get_system_busy(broker: BrokerThread) -> None:
    port = broker.config.remoting_port
    held = [_Conn(port) for _ in range(CONNECTIONS_MAX)]
    try:
        assert {c.route()[0] for c in held} <= {ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST}
        extra = _Conn(port)
        code, remark = extra.route()
        assert code == ResponseCode.SYSTEM_BUSY and "too many connections" in remark, (code, remark)
        assert extra.closed_by_peer()
        assert all(c.route()[0] is not None for c in held)  # the admitted ones are still served
        held.pop().close()

        def admitted() -> bool:
            probe = _Conn(port)
            try:
                return probe.route()[0] != ResponseCode.SYSTEM_BUSY
            finally:
                probe.close()

        _until(admitted, "a connection is admitted again once one closed")
    finally:
        for c in held:
            c.close()


def _telemetry(channel: grpc.Channel, stop: threading.Event, started: threading.Event) -> None:
    """Hold one Telemetry stream open (an RPC in progress) until ``stop``."""
    command = pb.service.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PRODUCER))

    def requests() -> Iterator[Any]:
        yield command
        stop.wait()

    stub = channel.stream_stream(
        f"/{SERVICE}/Telemetry",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.service.TelemetryCommand.FromString,
    )
    try:
        for _ in stub(requests(), metadata=[("x-mq-client-id", f"limits-{id(stop)}")], timeout=30):
            started.set()
    except grpc.RpcError:
        started.set()


def _query_route(channel: grpc.Channel) -> grpc.StatusCode:
    stub = channel.unary_unary(
        f"/{SERVICE}/QueryRoute",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.service.QueryRouteResponse.FromString,
    )
    request = pb.service.QueryRouteRequest(topic=pb.Resource(name="limits"))
    try:
        response = stub(request, timeout=5, metadata=[("x-mq-client-id", "limits-probe")])
    except grpc.RpcError as exc:
        return exc.code()
    assert response.status.code != errors.INTERNAL_SERVER_ERROR
    return grpc.StatusCode.OK


def test_grpc_calls_beyond_the_limit_are_resource_exhausted(broker: BrokerThread) -> None:
    stop = threading.Event()
    with grpc.insecure_channel(broker.grpc_endpoint) as channel:
        started = [threading.Event() for _ in range(RPCS_MAX)]
        streams = [threading.Thread(target=_telemetry, args=(channel, stop, s), daemon=True) for s in started]
        try:
            for thread in streams:
                thread.start()
            _until(lambda: all(s.is_set() for s in started), "every Telemetry stream answered")
            _until(
                lambda: _query_route(channel) is grpc.StatusCode.RESOURCE_EXHAUSTED,
                "a call over the limit is refused with RESOURCE_EXHAUSTED",
            )
        finally:
            stop.set()
            for thread in streams:
                thread.join(35)
        _until(lambda: _query_route(channel) is grpc.StatusCode.OK, "calls are served again")
