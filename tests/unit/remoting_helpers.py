"""Shared fixtures for the remoting tests: a table of frames and a two-ended in-memory wire."""

from __future__ import annotations

from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import LanguageCode, RequestCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand, make_request, make_response
from txmq.protocol.remoting.connection import Event, NeedData, RemotingConnection

# Golden 1, JSON header, computed by hand from protocol.md §6.1: the header is the compact JSON text
# below (62 + 63 = 125 ASCII bytes = 0x7d); body b"hello" (5 bytes); length = 4 + 125 + 5 = 134 = 0x86;
# second word = (0 << 24) | 125.
GOLDEN_JSON_HEADER = (
    b'{"code":310,"language":"JAVA","version":0,"opaque":7,"flag":0,'
    b'"extFields":{"a":"g","b":"t"},"serializeTypeCurrentRPC":"JSON"}'
)
GOLDEN_JSON_FRAME = bytes.fromhex("00000086 0000007d") + GOLDEN_JSON_HEADER + b"hello"
GOLDEN_JSON_COMMAND = RemotingCommand(code=310, opaque=7, ext_fields={"a": "g", "b": "t"}, body=b"hello")

# Golden 2, ROCKETMQ binary header (RocketMQSerializable layout): code 39 = 0x0027, language JAVA = 00,
# version 401 = 0x0191, opaque 5, flag 2 (oneway), remark length 0, extFields {"topic": "T"} =
# 0005 "topic" 00000001 "T" (12 bytes, length 0x0c). Header = 2+1+2+4+4 + 4 + 4+12 = 33 = 0x21;
# no body; length = 4 + 33 = 37 = 0x25; second word = (1 << 24) | 33 = 0x01000021.
GOLDEN_BINARY_FRAME = bytes.fromhex(
    "00000025 010000210027 00 0191 00000005 00000002000000000000000c 0005 746f706963 00000001 54"
)
GOLDEN_BINARY_COMMAND = RemotingCommand(
    code=39, opaque=5, flag=2, ext_fields={"topic": "T"}, version=401, serialize_type=SerializeType.ROCKETMQ
)

_request = make_request(
    RequestCode.PULL_MESSAGE, 12, {"consumerGroup": "g", "topic": "ü"}, b"", language=LanguageCode.PYTHON
)
TABLE: list[RemotingCommand] = [
    GOLDEN_JSON_COMMAND,
    GOLDEN_BINARY_COMMAND,
    _request,
    make_response(_request, 19, "no new message", {"nextBeginOffset": "5"}),
    make_request(RequestCode.END_TRANSACTION, 1 << 30, {"commitOrRollback": "8"}, oneway=True),
    RemotingCommand(code=0, opaque=-3, flag=1, remark="é", body=b"\x00" * 300),
    RemotingCommand(code=105, remark="r", body=b"\xff\x00", serialize_type=SerializeType.ROCKETMQ),
    RemotingCommand(code=200050, body=b"x" * 70_000),
]
FRAMES: list[tuple[RemotingCommand, bytes]] = [(cmd, frame.encode(cmd)) for cmd in TABLE]


def drain(conn: RemotingConnection) -> list[Event]:
    """Every event available now, up to (not including) NEED_DATA."""
    events: list[Event] = []
    while True:
        event = conn.next_event()
        if isinstance(event, NeedData):
            return events
        events.append(event)


class ConnectionPair:
    """A client and a broker connection joined by an in-memory wire (h11's ConnectionPair idea)."""

    def __init__(self) -> None:
        self.client = RemotingConnection(language=LanguageCode.PYTHON)
        self.broker = RemotingConnection(language=LanguageCode.JAVA, first_opaque=1_000_000)

    def other(self, side: RemotingConnection) -> RemotingConnection:
        return self.broker if side is self.client else self.client

    def send(self, side: RemotingConnection, cmd: RemotingCommand) -> list[Event]:
        """Send ``cmd`` from ``side``; return what the other side decodes from those bytes."""
        peer = self.other(side)
        peer.receive_data(side.send(cmd))
        return drain(peer)
