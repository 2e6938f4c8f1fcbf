"""Pure parts of the gRPC transport: message conversions, status mapping, back-off schedules."""

from __future__ import annotations

import grpc
import pytest

from txmq.client import Feature, Message
from txmq.client import _grpc_convert as conv
from txmq.client._grpc import GrpcTransport
from txmq.common import errors
from txmq.common.message import MessageType
from txmq.protocol.grpc import convert as server_convert
from txmq.protocol.grpc import pb


def test_a_sent_message_reads_back_the_same_through_the_servers_conversions() -> None:
    message = Message(
        "orders", b"body", tags="paid", keys=("k1", "k2"), properties={"a": "1"}, message_group="g"
    )
    wire = conv.wire_message(message, now_ms=1_700_000_000_123)
    assert wire.system_properties.message_type == pb.MessageType.FIFO
    stored = server_convert.to_message(wire)  # what txmq's broker makes of it
    assert (stored.tags, stored.keys, dict(stored.properties), stored.message_group) == (
        "paid", ("k1", "k2"), {"a": "1"}, "g",
    )  # fmt: skip
    assert stored.message_id == wire.system_properties.message_id


def test_delay_levels_become_delivery_times() -> None:
    wire = conv.wire_message(Message("t", b"x", delay_level=3), now_ms=10_000)
    assert server_convert.timestamp_ms(wire.system_properties.delivery_timestamp) == 20_000
    assert wire.system_properties.message_type == pb.MessageType.DELAY
    huge = conv.wire_message(Message("t", b"x", delay_level=99), now_ms=0)
    assert server_convert.timestamp_ms(huge.system_properties.delivery_timestamp) == 7_200_000


def test_a_delivered_message_becomes_a_view() -> None:
    wire = pb.Message(body=b"hello")
    wire.topic.name = "t"
    sysp = wire.system_properties
    sysp.message_id, sysp.tag, sysp.receipt_handle = "ID", "tag", "handle"
    sysp.message_type, sysp.queue_id, sysp.queue_offset, sysp.delivery_attempt = 1, 2, 7, 3
    sysp.dead_letter_queue.topic, sysp.dead_letter_queue.message_id = "origin", "ORIG"
    view = conv.view_of(wire, transaction_id="tx")
    assert (view.body, view.tags, view.receipt_handle, view.queue_id, view.queue_offset) == (
        b"hello", "tag", "handle", 2, 7,
    )  # fmt: skip
    assert (view.delivery_attempt, view.reconsume_times, view.transaction_id) == (3, 2, "tx")
    assert view.message_type is MessageType.NORMAL
    assert view.properties["DLQ_ORIGIN_TOPIC"] == "origin"


def test_statuses_map_to_the_error_hierarchy() -> None:
    with pytest.raises(errors.TopicNotFound):
        conv.check(pb.Status(code=pb.Code.TOPIC_NOT_FOUND, message="no"), "QueryRoute")
    conv.check(pb.Status(code=pb.Code.OK), "x")


def test_customized_and_exponential_backoffs() -> None:
    policy = pb.RetryPolicy(max_attempts=3)
    for ms in (1000, 5000):
        server_convert.set_duration(policy.customized_backoff.next.add(), ms)
    assert conv.backoff_schedule_ms(policy) == (1000, 5000)
    exp = pb.RetryPolicy(max_attempts=4)
    server_convert.set_duration(exp.exponential_backoff.initial, 100)
    server_convert.set_duration(exp.exponential_backoff.max, 300)
    exp.exponential_backoff.multiplier = 2
    assert conv.backoff_schedule_ms(exp) == (100, 200, 300, 300)


def test_feature_flags_and_endpoints() -> None:
    transport = GrpcTransport("http://127.0.0.1:1;127.0.0.1:2")
    assert transport.endpoints == ["127.0.0.1:1", "127.0.0.1:2"]
    assert {f for f in Feature if transport.supports(f)} == {
        Feature.POP, Feature.PULL, Feature.BATCH_SEND, Feature.DELIVERY_TIMESTAMP, Feature.ONEWAY,
    }  # fmt: skip
    assert ("x-mq-language", "PYTHON") in transport.metadata
    assert transport.retry_backoff_ms("unknown-group", 2) == 5000  # RocketMQ's schedule until told
    with pytest.raises(errors.InvalidArgument):
        GrpcTransport(" ; ")
    assert grpc.StatusCode.UNAVAILABLE in conv._RPC_ERRORS
