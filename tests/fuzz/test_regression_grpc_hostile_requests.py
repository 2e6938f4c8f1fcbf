"""Regressions found by the gRPC fuzzer, and the oversized / absurd requests it cannot reach by chance."""

from __future__ import annotations

import gzip
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.fuzz.grpc_target import METHODS, SERVICE, BrokerThread, alive, call
from txmq.common import errors, limits
from txmq.protocol.grpc import convert, pb

S = pb.service
BY_NAME = {m.name: m for m in METHODS}


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[grpc.Channel]:
    target = BrokerThread(Path(tmp_path_factory.mktemp("hostile")))
    target.start()
    options = [("grpc.max_send_message_length", 64 * limits.MiB)]
    try:
        with grpc.insecure_channel(target.grpc_endpoint, options=options) as opened:
            yield opened
            assert alive(opened, uuid.uuid4().hex[:12])
    finally:
        target.stop()


@pytest.mark.parametrize("name", ["QueryRoute", "SendMessage", "ReceiveMessage", "Telemetry"])
def test_regression_undecodable_request_answers_bad_request_not_unknown(
    channel: grpc.Channel, name: str
) -> None:
    """Was: gRPC UNKNOWN "Unexpected DecodeError" plus a logged traceback, for every RPC."""
    method = BY_NAME[name]
    code, responses, details = call(channel, method, b"\xff\xff\xff\xff", client_id="c", timeout_s=5)
    assert code is grpc.StatusCode.OK, details
    statuses = [pb.service.__dict__[method.output_type.name].FromString(r).status for r in responses]
    assert [s.code for s in statuses if s.code] == [errors.BAD_REQUEST]
    assert "malformed" in statuses[-1].message


def _send(channel: grpc.Channel, *messages: Any) -> Any:
    stub = channel.unary_unary(
        f"/{SERVICE}/SendMessage",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=S.SendMessageResponse.FromString,
    )
    return stub(S.SendMessageRequest(messages=list(messages)), timeout=30, metadata=[("x-mq-client-id", "c")])


def _message(body: bytes, encoding: int = 0) -> Any:
    sysp = pb.SystemProperties(
        message_id=uuid.uuid4().hex, message_type=pb.MessageType.NORMAL, body_encoding=encoding
    )
    return pb.Message(topic=pb.Resource(name="hostile"), body=body, system_properties=sysp)


def test_regression_gzip_bomb_is_rejected_without_inflating_it(channel: grpc.Channel) -> None:
    """Was: the whole body was decompressed before any size check; 16 MiB of deflated zeros (one
    allowed gRPC message) would inflate to ~16 GiB of broker memory."""
    bomb = zlib.compress(b"\0" * (64 * limits.MiB), 9)
    assert len(bomb) < 100 * limits.KiB
    with pytest.raises(errors.MessageTooLarge):  # stops at the limit, inside the decoder
        convert.to_message(_message(bomb, pb.Encoding.GZIP))
    for gzip_framed in (False, True):
        small = gzip.compress(b"ok") if gzip_framed else zlib.compress(b"ok")
        assert convert.to_message(_message(small, pb.Encoding.GZIP)).body == b"ok"
    response = _send(channel, _message(bomb, pb.Encoding.GZIP))
    assert response.status.code == errors.MESSAGE_BODY_TOO_LARGE, response.status.message


def test_an_oversized_body_and_an_absurd_batch_get_clear_codes(channel: grpc.Channel) -> None:
    too_big = _send(channel, _message(b"x" * (limits.body_bytes_max + 1)))
    assert too_big.status.code == errors.MESSAGE_BODY_TOO_LARGE
    batch = _send(channel, *[_message(b"x") for _ in range(limits.batch_count_max + 1)])
    assert 40000 <= batch.status.code < 50000, batch.status
    assert batch.status.code != errors.OK


def test_a_request_over_the_grpc_frame_limit_is_resource_exhausted(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _send(channel, _message(b"x" * (limits.grpc_message_bytes_max + 1)))
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
