"""RocketMQ 4.x "remoting" protocol, sans-IO: frames, commands, headers, bodies, message records.

No sockets and no asyncio here: the asyncio server and client drivers live in ``txmq.server`` and
``txmq.client`` and feed bytes through ``RemotingConnection``.
"""

from txmq.protocol.remoting.codes import (
    RPC_ONEWAY,
    RPC_TYPE,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from txmq.protocol.remoting.command import RemotingCommand, make_request, make_response
from txmq.protocol.remoting.connection import (
    NEED_DATA,
    ConnectionClosed,
    ConnectionState,
    Event,
    RemotingConnection,
    Response,
    UnmatchedResponse,
)
from txmq.protocol.remoting.errors import (
    InvalidBody,
    InvalidHeader,
    LocalProtocolError,
    RemoteProtocolError,
)

__all__ = [
    "NEED_DATA",
    "RPC_ONEWAY",
    "RPC_TYPE",
    "ConnectionClosed",
    "ConnectionState",
    "Event",
    "InvalidBody",
    "InvalidHeader",
    "LanguageCode",
    "LocalProtocolError",
    "RemoteProtocolError",
    "RemotingCommand",
    "RemotingConnection",
    "RequestCode",
    "Response",
    "ResponseCode",
    "SerializeType",
    "UnmatchedResponse",
    "make_request",
    "make_response",
]
