"""Instructions per frame of decoding a ROCKETMQ binary header (its extFields map), for callgrind.

Decodes ``N`` pre-rendered frames through ``frame.decode_frame``::

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/x.out \
        .venv/bin/python benchmarks/hdrmap_cg.py CASE N

per frame = (I(N2) - I(N1)) / (N2 - N1). Cases: send (a SEND_MESSAGE_V2 request with a plain 1 KB
message, rendered by the SDK's ``BinarySendHeaders`` and ``send_binary_request``), end (an
END_TRANSACTION request, ROCKETMQ header), answer (the broker's SEND answer, as the SDK reads it).
Results: benchmarks/results/hdrmap/README.md.
"""

from __future__ import annotations

import sys

from txmq.client._single import BinarySendHeaders
from txmq.common.message import Message, MessageQueue
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import RequestCode, SerializeType
from txmq.protocol.remoting.command import make_request
from txmq.protocol.remoting.connection import RemotingConnection

BODY = b"x" * 1024
END_EXT = {
    "producerGroup": "bench-producer", "tranStateTableOffset": "1234", "commitLogOffset": "567890",
    "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "7F0000010BB818B4AAC2380A2DC80000",
    "transactionId": "7F0000010BB818B4AAC2380A2DC80000",
}  # fmt: skip


def frames() -> dict[str, bytes]:
    """The three frames, rendered once."""
    mq = MessageQueue("bench-topic", 1, "broker-a")
    ext, body, _ = BinarySendHeaders().request(mq, Message("bench-topic", BODY), "bench-producer", 0)
    conn = RemotingConnection(serialize_type=SerializeType.ROCKETMQ)
    send = conn.send_binary_request(RequestCode.SEND_MESSAGE_V2, ext, body)[1]
    request, _ = frame.decode_frame(send, 0) or (None, 0)
    assert request is not None
    rocketmq = SerializeType.ROCKETMQ
    end = make_request(RequestCode.END_TRANSACTION, 7, dict(END_EXT), b"", serialize_type=rocketmq)
    answer = frame.encode_send_response(request, "7F0000010BB818B4AAC2380A2DC80000", 1, 123456)
    return {"send": send, "end": frame.encode(end), "answer": answer}


def main(case: str, n: int) -> None:
    data = frames()[case]
    decode = frame.decode_frame
    for _ in range(n):
        decode(data, 0)
    print(f"done {case} {n}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
