"""Micro-benchmark of the remoting codec: SEND_MESSAGE_V2 frames with a 1 KB body, frames/s.

Measures, single-threaded, for a few seconds each:
  encode        RemotingConnection.send(request) (JSON header, pending-table bookkeeping)
  decode        RemotingConnection.receive_data + next_event, 64 frames per receive_data
  header        SendMessageRequestHeaderV2.from_ext_fields on the decoded extFields
  round trip    new_request + send + receive + next_event + parse header + make_response + send
  pull encode   PULL_MESSAGE body of 32 stored 1 KB messages (raw properties), per message
  pull decode   decoding that body back into WireMessages, per message

Run: PYTHONPATH=src python benchmarks/remoting_codec_bench.py [seconds-per-case]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from txmq import native
from txmq.protocol.remoting import message_codec as mc
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.connection import RemotingConnection, Response
from txmq.protocol.remoting.headers import SendMessageRequestHeaderV2

BODY = b"x" * 1024
PROPERTIES = b"UNIQ_KEY\x017F0000010BB818B4AAC2380A2DC80000\x02WAIT\x01true\x02TAGS\x01TagA\x02"
HEADER = SendMessageRequestHeaderV2(
    producer_group="bench-producer", topic="bench-topic", default_topic="TBW102", default_topic_queue_nums=4,
    queue_id=1, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0,
    properties=PROPERTIES.decode(),
    reconsume_times=0, unit_mode=False, max_reconsume_times=16, batch=False,
)  # fmt: skip
EXT = HEADER.to_ext_fields()


def _rate(name: str, seconds: float, batch: int, step: Callable[[], None]) -> float:
    done = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step()
        done += batch
    rate = done / elapsed
    print(f"{name:<12} {rate:>12,.0f} /s  ({1e6 / rate:.2f} us each)")
    return rate


def main(seconds: float) -> None:
    print(native.summary())
    client = RemotingConnection()

    def encode() -> None:
        req = client.new_request(RequestCode.SEND_MESSAGE_V2, EXT, BODY, oneway=True)
        client.send(req)

    _rate("encode", seconds, 1, encode)

    chunk = b"".join(client.send(client.new_request(310, EXT, BODY, oneway=True)) for _ in range(64))
    server = RemotingConnection()

    def decode() -> None:
        server.receive_data(chunk)
        for _ in range(64):
            server.next_event()

    _rate("decode", seconds, 64, decode)

    def header() -> None:
        SendMessageRequestHeaderV2.from_ext_fields(EXT)

    _rate("header", seconds, 1, header)

    broker = RemotingConnection()

    def round_trip() -> None:
        broker.receive_data(client.send(client.new_request(310, EXT, BODY)))
        request = broker.next_event()
        assert isinstance(request, RemotingCommand)
        SendMessageRequestHeaderV2.from_ext_fields(request.ext_fields)
        reply = make_response(request, 0, ext_fields={"msgId": "0A", "queueId": "1", "queueOffset": "5"})
        client.receive_data(broker.send(reply))
        assert isinstance(client.next_event(), Response)

    _rate("round trip", seconds, 1, round_trip)

    stored = [
        mc.WireMessage(
            topic="bench-topic",
            body=BODY,
            queue_id=1,
            queue_offset=i,
            commit_log_offset=i * 1200,
            born_timestamp=1_700_000_000_000,
            born_host=("10.0.0.9", 50000),
            store_timestamp=1_700_000_000_001,
            store_host=("10.0.0.1", 10911),
            properties_raw=PROPERTIES,
            body_crc=1,
        )
        for i in range(32)
    ]

    def pull_body() -> None:
        mc.encode_messages(stored)

    _rate("pull encode", seconds, 32, pull_body)
    body = mc.encode_messages(stored)

    def pull_decode() -> None:
        mc.decode_messages(body)

    _rate("pull decode", seconds, 32, pull_decode)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
