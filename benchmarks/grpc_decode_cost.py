"""Cost of decoding a SendMessageRequest for the send lane, per message: ``old`` is protobuf's
``FromString`` + ``convert.to_lean`` + the first born host (the door before ``wire.send_lane``), ``new``
is ``wire.send_lane`` on the same bytes. The request is what ``grpc_bench.py`` sends (1 KB body, tag,
born host and timestamp, message id).

Prints CPU µs per message. For instruction counts run it under callgrind at two round counts and divide
the difference: ``valgrind --tool=callgrind python benchmarks/grpc_decode_cost.py new 2200 1`` minus the
same at 200 rounds, over 2,000 x COUNT messages.

Usage: ``python benchmarks/grpc_decode_cost.py old|new ROUNDS [COUNT (100)]``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from txmq.protocol.grpc import convert, pb, wire

S = pb.service


def request(count: int) -> bytes:
    body = os.urandom(512).hex().encode()
    messages = []
    for i in range(count):
        message = pb.Message(body=body)
        message.topic.name = "BenchGrpcSend"
        sysp = message.system_properties
        sysp.tag, sysp.born_host, sysp.message_id = "bench", "127.0.0.1", f"01BENCH{i:025d}"
        sysp.body_encoding, sysp.message_type = pb.Encoding.IDENTITY, pb.MessageType.NORMAL
        convert.set_timestamp(sysp.born_timestamp, 1_800_000_000_123)
        messages.append(message)
    return bytes(S.SendMessageRequest(messages=messages).SerializeToString())


def old(data: bytes) -> Any:
    parsed = S.SendMessageRequest.FromString(data)
    return convert.to_lean(parsed.messages), parsed.messages[0].system_properties.born_host


def main() -> None:
    mode, rounds = sys.argv[1], int(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    data = request(count)
    decode = old if mode == "old" else wire.send_lane
    if decode(data) is None:
        raise SystemExit("the request was declined")
    start = time.process_time()
    for _ in range(rounds):
        decode(data)
    print(f"{mode}: {(time.process_time() - start) / rounds / count * 1e6:.3f} us CPU per message")


if __name__ == "__main__":
    main()
