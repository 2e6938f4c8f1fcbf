"""Raw sockets against both doors of a real broker: garbage instead of the HTTP/2 preface, malformed and
truncated HTTP/2 frames, garbage remoting frames, and well-framed remoting requests with hostile codes,
headers and bodies. The broker must stay up (a normal gRPC send and receive work afterwards), never
answer a remoting request with an internal error, and leave a store that verifies clean."""

from __future__ import annotations

import json
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.grpc_target import BrokerThread, FuzzFigures, alive
from tests.fuzz.test_fuzz_grpc import EXAMPLES
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.command import make_request
from txmq.protocol.remoting.connection import (
    NEED_DATA,
    ConnectionClosed,
    RemotingConnection,
    Response,
    UnmatchedResponse,
)
from txmq.protocol.remoting.frame import encode
from txmq.storage.fs import OsFileSystem
from txmq.storage.verify import verify_store

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = {
    "max_examples": EXAMPLES * 4,
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
HEADER_KEYS = [
    "topic",
    "queueId",
    "consumerGroup",
    "producerGroup",
    "queueOffset",
    "maxMsgNums",
    "commitOffset",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "batch",
    "tranStateTableOffset",
    "commitLogOffset",
    "commitOrRollback",
    "msgId",
    "transactionId",
    "suspendTimeoutMillis",
    "subscription",
    "expressionType",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "defaultTopic",
    "defaultTopicQueueNums",
    "perm",
    "readQueueNums",
    "writeQueueNums",
]
VALUES = st.sampled_from(
    [
        "",
        "0",
        "-1",
        "2147483648",
        "9" * 30,
        "fz",
        "%RETRY%g",
        "NaN",
        "a" * 2000,
        "\x00\x01",
        "true",
        "*",
        "1e9",
        "\u2603",
    ]
) | st.text(max_size=12)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    target = BrokerThread(Path(tmp_path_factory.mktemp("fuzz-frames")))
    target.start()
    yield target
    target.stop()
    report = verify_store(OsFileSystem(), str(Path(target.config.data_dir) / "store"))
    assert report.ok, report.problems


@pytest.fixture(scope="module")
def figures() -> FuzzFigures:
    return FuzzFigures()


def _exchange(port: int, data: bytes, read_s: float = 0.2) -> bytes:
    """Write ``data``, read whatever comes back until the peer closes or goes quiet, close."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.settimeout(read_s)
            while chunk := sock.recv(65536):
                got += chunk
        except (TimeoutError, ConnectionError):
            pass
    return got


def _h2_frame(kind: int, flags: int, stream: int, payload: bytes, declared: int | None = None) -> bytes:
    length = len(payload) if declared is None else declared
    return struct.pack(">I", length)[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


H2_FRAMES = st.builds(
    _h2_frame,
    st.integers(0, 12),  # DATA .. PRIORITY_UPDATE, and unknown types
    st.integers(0, 255),
    st.sampled_from([0, 1, 2, 3, 2**31 - 1]) | st.integers(0, 2**32 - 1),
    st.binary(max_size=64),
    st.none() | st.sampled_from([0, 1, 2**14, 2**14 + 1, 2**24 - 1]),
)


def test_fuzz_http2_garbage_preface(broker: BrokerThread, figures: FuzzFigures) -> None:
    @settings(**SETTINGS)
    @given(
        garbage=st.binary(min_size=1, max_size=128)
        | st.just(PREFACE[:10])
        | st.just(b"GET / HTTP/1.1\r\n\r\n")
    )
    def run(garbage: bytes) -> None:
        figures.inputs["http2-preface"] += 1
        _exchange(broker.config.grpc_port, garbage, read_s=0.05)

    run()


def test_fuzz_http2_malformed_and_truncated_frames(broker: BrokerThread, figures: FuzzFigures) -> None:
    @settings(**SETTINGS)
    @given(frames=st.lists(H2_FRAMES, min_size=1, max_size=6), cut=st.integers(0, 20))
    def run(frames: list[bytes], cut: int) -> None:
        figures.inputs["http2-frames"] += 1
        data = PREFACE + _h2_frame(4, 0, 0, b"") + b"".join(frames)
        _exchange(broker.config.grpc_port, data[: len(data) - cut], read_s=0.05)

    run()


def test_fuzz_remoting_garbage_bytes(broker: BrokerThread, figures: FuzzFigures) -> None:
    @settings(**SETTINGS)
    @given(
        length=st.sampled_from([0, 1, 4, 8, 2**31 - 1, 2**32 - 1, 17 * 2**20]) | st.integers(0, 2**32 - 1),
        header_length=st.integers(0, 2**32 - 1),
        rest=st.binary(max_size=64),
    )
    def run(length: int, header_length: int, rest: bytes) -> None:
        figures.inputs["remoting-garbage"] += 1
        _exchange(broker.config.remoting_port, struct.pack(">II", length, header_length) + rest, read_s=0.05)

    run()


def _request(port: int, frame: bytes) -> list[Response | UnmatchedResponse]:
    """Send one request frame; return the broker's answer (empty when it closed the connection)."""
    conn = RemotingConnection()  # our frame was built by hand: its answer arrives "unmatched"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(frame)
            while chunk := sock.recv(65536):
                conn.receive_data(chunk)
                while (event := conn.next_event()) is not NEED_DATA:
                    if isinstance(event, Response | UnmatchedResponse):
                        return [event]
                    if isinstance(event, ConnectionClosed):
                        return []
        except (TimeoutError, ConnectionError):
            pass
    return []


def test_fuzz_remoting_hostile_requests(broker: BrokerThread, figures: FuzzFigures) -> None:
    codes = [*sorted(int(c) for c in RequestCode), 0, -1, 9999]
    answered: list[int] = []

    @settings(**SETTINGS)
    @given(
        code=st.sampled_from(codes),
        ext=st.dictionaries(st.sampled_from(HEADER_KEYS), VALUES, max_size=8),
        body=st.binary(max_size=128) | st.sampled_from([b"{}", b"[]", b'{"consumerDataSet": 5}', b"null"]),
        json_header=st.booleans(),
    )
    def run(code: int, ext: dict[str, str], body: bytes, json_header: bool) -> None:
        figures.inputs["remoting-requests"] += 1
        frame = encode(make_request(code, 1, ext, body))
        if json_header:  # a hand-written JSON header with wrong types in it
            header = json.dumps({"code": code, "flag": 0, "opaque": 1, "language": "JAVA", "version": 1,
                                 "extFields": {k: [v] for k, v in ext.items()}}).encode()  # fmt: skip
            frame = struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body
        for response in _request(broker.config.remoting_port, frame):
            answered.append(response.command.code)
            remark = response.command.remark or ""
            if remark.startswith("internal error"):
                figures.crashes.append(f"remoting code {code} {ext!r}: {remark}")

    run()
    assert answered, "the broker answered none of the requests: the harness reads nothing"
    assert figures.crashes == []


def test_the_broker_survives_the_raw_frames(
    broker: BrokerThread, figures: FuzzFigures, capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print("\n" + figures.line())
    with grpc.insecure_channel(broker.grpc_endpoint) as channel:
        assert alive(channel, uuid.uuid4().hex[:12])
    assert figures.crashes == []
