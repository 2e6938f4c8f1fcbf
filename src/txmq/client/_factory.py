"""Choosing a transport: ``"remoting"`` (default, name-server endpoints) or ``"grpc"`` (proxy endpoints)."""

from __future__ import annotations

from typing import Literal

from txmq.client._transport import Transport
from txmq.common import errors

TransportName = Literal["remoting", "grpc"]


def make_transport(
    endpoints: str, transport: TransportName | Transport, *, request_timeout_s: float
) -> Transport:
    """A fresh transport; pass an existing ``Transport`` object to share one between clients."""
    if not isinstance(transport, str):
        return transport
    if transport == "remoting":
        from txmq.client._remoting import RemotingTransport

        return RemotingTransport(endpoints, request_timeout_s=request_timeout_s)
    if transport == "grpc":
        from txmq.client._grpc import GrpcTransport

        return GrpcTransport(endpoints, request_timeout_s=request_timeout_s)
    raise errors.InvalidArgument(f"transport must be 'remoting' or 'grpc', not {transport!r}")
