"""Instructions per frame of the remoting header codec, for callgrind (hdrdecode.md).

Each case runs one codec step ``N`` times on a SEND_MESSAGE_V2 request (1 KB body, the SDK's plain
transactional properties) or its send response, JSON or ROCKETMQ header::

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/x.out \
        python benchmarks/hdrdecode_cg.py CASE N

and per frame = (I(N2) - I(N1)) / (N2 - N1). Cases: req-json, req-bin (broker: decode_frame of a
request), resp-json, resp-bin (SDK: decode_frame of a send response), sresp-json, sresp-bin (broker:
encode_send_response), end-json, end-bin (broker: decode of an END_TRANSACTION request), sdk-json,
sdk-bin (SDK: a transactional half's pre-rendered header and its frame, ``_single_request`` +
``send_json_request`` or their binary twins).
"""

from __future__ import annotations

import sys

from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import RequestCode, SerializeType
from txmq.protocol.remoting.command import make_request
from txmq.protocol.remoting.headers import SendMessageRequestHeaderV2

BODY = b"x" * 1024
PROPERTIES = (
    "UNIQ_KEY\x017F0000010BB818B4AAC2380A2DC80000\x02TRAN_MSG\x01true\x02PGROUP\x01bench-producer\x02"
)
EXT = SendMessageRequestHeaderV2(
    producer_group="bench-producer", topic="bench-topic", default_topic="TBW102", default_topic_queue_nums=4,
    queue_id=1, sys_flag=4, born_timestamp=1_700_000_000_000, flag=0, properties=PROPERTIES,
    reconsume_times=0, unit_mode=False, max_reconsume_times=16, batch=False,
).to_ext_fields()  # fmt: skip
END_EXT = {
    "producerGroup": "bench-producer", "tranStateTableOffset": "1234", "commitLogOffset": "567890",
    "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "7F0000010BB818B4AAC2380A2DC80000",
    "transactionId": "7F0000010BB818B4AAC2380A2DC80000",
}  # fmt: skip


def _request(kind: str, code: int, ext: dict[str, str], body: bytes) -> object:
    st = SerializeType.JSON if kind == "json" else SerializeType.ROCKETMQ
    return make_request(code, 12345, dict(ext), body, serialize_type=st)


def main(case: str, n: int) -> None:
    name, kind = case.rsplit("-", 1)
    send = _request(kind, RequestCode.SEND_MESSAGE_V2, EXT, BODY)
    if name == "req":
        data = frame.encode(send)  # type: ignore[arg-type]
        step = lambda: frame.decode_frame(data, 0)  # noqa: E731
    elif name == "end":
        data = frame.encode(_request(kind, RequestCode.END_TRANSACTION, END_EXT, b""))  # type: ignore[arg-type]
        step = lambda: frame.decode_frame(data, 0)  # noqa: E731
    elif name == "resp":
        data = frame.encode_send_response(send, "7F0000010BB818B4AAC2380A2DC80000", 1, 123456)  # type: ignore[arg-type]
        step = lambda: frame.decode_frame(data, 0)  # noqa: E731
    elif name == "sresp":
        step = lambda: frame.encode_send_response(send, "7F0000010BB818B4AAC2380A2DC80000", 1, 123456)  # type: ignore[arg-type]  # noqa: E731
    elif name == "sdk":
        from txmq.client._remoting import RemotingTransport
        from txmq.common.message import Message, MessageQueue
        from txmq.protocol.remoting.connection import RemotingConnection

        transport = RemotingTransport("127.0.0.1:9876")
        mq = MessageQueue("bench-topic", 1, "broker-a")
        message = Message("bench-topic", BODY, transactional=True)
        if kind == "json":
            conn = RemotingConnection()

            def step() -> None:
                ext, body, _ = transport._single_request(mq, message, "bench-producer", 1)
                conn.forget(conn.send_json_request(RequestCode.SEND_MESSAGE_V2, ext, body)[0])

        else:
            conn = RemotingConnection(serialize_type=SerializeType.ROCKETMQ)

            def step() -> None:
                ext, body, _ = transport._single_binary_request(mq, message, "bench-producer", 1)
                conn.forget(conn.send_binary_request(RequestCode.SEND_MESSAGE_V2, ext, body)[0])

    else:
        raise SystemExit(f"unknown case {case}")
    for _ in range(n):
        step()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
