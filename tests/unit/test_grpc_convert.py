"""Wire <-> txmq conversions of the gRPC door: what official clients send and what they need back."""

from __future__ import annotations

import gzip
import hashlib
import subprocess
import zlib
from pathlib import Path

import pytest

from txmq.common import errors
from txmq.common import properties as props
from txmq.common.message import MessageQueue, MessageType, MessageView
from txmq.protocol.grpc import convert, pb, routes, settings
from txmq.protocol.grpc.status import status_of

from ..conftest import PYTHON, subprocess_env


def _wire(**sysp: object) -> object:
    message = pb.Message(body=b"hello")
    message.topic.name = "orders"
    message.system_properties.message_id = "01ABC"
    message.system_properties.body_encoding = pb.Encoding.IDENTITY
    message.system_properties.message_type = pb.MessageType.NORMAL
    for key, value in sysp.items():
        setattr(message.system_properties, key, value)
    return message


def _view(**overrides: object) -> MessageView:
    base: dict[str, object] = {
        "topic": "orders",
        "body": b"payload",
        "message_id": "01DEF",
        "queue_id": 2,
        "queue_offset": 7,
        "commit_log_offset": 1234,
        "born_timestamp_ms": 1_700_000_000_123,
        "store_timestamp_ms": 1_700_000_000_456,
        "tags": "created",
        "keys": ("k1", "k2"),
        "properties": {props.TAGS: "created", props.UNIQ_KEY: "01DEF", "color": "red"},
        "born_host": "10.0.0.1",
        "store_host": "127.0.0.1:10911",
        "delivery_attempt": 3,
        "receipt_handle": "t1|orders|2|7|9|100",
    }
    base.update(overrides)
    return MessageView(**base)  # type: ignore[arg-type]


def test_loading_generated_classes_leaves_home_alone_and_the_client_usable(home_dir: Path) -> None:
    script = (
        "import os, sys\n"
        "from txmq.protocol.grpc import pb\n"
        "assert 'rocketmq.v5' not in sys.modules and 'rocketmq' not in sys.modules\n"
        "assert os.listdir(os.environ['HOME']) == [], os.listdir(os.environ['HOME'])\n"
        "from rocketmq import Producer\n"
        "from rocketmq.grpc_protocol import definition_pb2\n"
        "assert definition_pb2 is pb.definition\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [PYTHON, "-c", script], env=subprocess_env(home_dir), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert pb.service.SendMessageResponse.DESCRIPTOR.full_name == "apache.rocketmq.v2.SendMessageResponse"


def test_inbound_normal_message_keeps_tag_keys_id_and_user_properties() -> None:
    wire = _wire(tag="created")
    wire.system_properties.keys.extend(["k1", "k2"])  # type: ignore[attr-defined]
    wire.user_properties["color"] = "red"  # type: ignore[attr-defined]
    message = convert.to_message(wire)
    assert message.topic == "orders"
    assert message.body == b"hello"
    assert message.tags == "created"
    assert message.keys == ("k1", "k2")
    assert message.message_id == "01ABC"
    assert dict(message.properties) == {"color": "red"}
    assert message.message_type is MessageType.NORMAL


def test_inbound_fifo_delay_and_transaction_types() -> None:
    fifo = convert.to_message(_wire(message_group="g1", message_type=pb.MessageType.FIFO))
    assert fifo.message_group == "g1"
    assert fifo.message_type is MessageType.FIFO
    delayed_wire = _wire(message_type=pb.MessageType.DELAY)
    delayed_wire.system_properties.delivery_timestamp.seconds = 1_700_000_100  # type: ignore[attr-defined]
    delayed_wire.system_properties.delivery_timestamp.nanos = 250_000_000  # type: ignore[attr-defined]
    delayed = convert.to_message(delayed_wire)
    assert delayed.delivery_timestamp_ms == 1_700_000_100_250
    assert delayed.message_type is MessageType.DELAY
    tx_wire = _wire(message_type=pb.MessageType.TRANSACTION)
    tx_wire.system_properties.orphaned_transaction_recovery_duration.seconds = 12  # type: ignore[attr-defined]
    tx = convert.to_message(tx_wire)
    assert tx.transactional
    assert tx.check_immunity_s == 12


def test_inbound_python_client_delivery_timestamp_in_whole_seconds() -> None:
    wire = _wire(message_type=pb.MessageType.DELAY)
    wire.system_properties.delivery_timestamp.seconds = 1_800_000_000  # type: ignore[attr-defined]
    assert convert.to_message(wire).delivery_timestamp_ms == 1_800_000_000_000


@pytest.mark.parametrize("compress", [gzip.compress, zlib.compress])
def test_inbound_gzip_body_is_decompressed(compress: object) -> None:
    wire = _wire(body_encoding=pb.Encoding.GZIP)
    wire.body = compress(b"x" * 1000)  # type: ignore[attr-defined, operator]
    assert convert.to_message(wire).body == b"x" * 1000


def test_inbound_corrupt_gzip_body_is_a_bad_request() -> None:
    wire = _wire(body_encoding=pb.Encoding.GZIP)
    wire.body = b"not compressed"  # type: ignore[attr-defined]
    with pytest.raises(errors.InvalidArgument, match="GZIP"):
        convert.to_message(wire)


def test_outbound_message_has_every_field_clients_need() -> None:
    wire = convert.to_wire(_view(), invisible_ms=30_000)
    sysp = wire.system_properties
    assert wire.topic.name == "orders"
    assert wire.body == b"payload"
    assert sysp.body_encoding == pb.Encoding.IDENTITY
    assert sysp.body_digest.type == pb.DigestType.MD5
    assert sysp.body_digest.checksum == hashlib.md5(b"payload").hexdigest().upper()
    assert sysp.message_id == "01DEF"
    assert sysp.message_type == pb.MessageType.NORMAL
    assert convert.timestamp_ms(sysp.born_timestamp) == 1_700_000_000_123
    assert convert.timestamp_ms(sysp.store_timestamp) == 1_700_000_000_456
    assert sysp.born_host == "10.0.0.1"
    assert sysp.store_host == "127.0.0.1:10911"
    assert sysp.tag == "created"
    assert list(sysp.keys) == ["k1", "k2"]
    assert sysp.receipt_handle == "t1|orders|2|7|9|100"
    assert sysp.delivery_attempt == 3
    assert sysp.queue_id == 2
    assert sysp.queue_offset == 7
    assert convert.duration_ms(sysp.invisible_duration) == 30_000
    assert dict(wire.user_properties) == {"color": "red"}  # system keys are not user properties
    assert not sysp.HasField("dead_letter_queue")
    assert not sysp.HasField("message_group")


def test_outbound_fifo_delay_and_dead_letter_fields() -> None:
    fifo = convert.to_wire(_view(message_group="g1", message_type=MessageType.FIFO))
    assert fifo.system_properties.message_group == "g1"
    assert fifo.system_properties.message_type == pb.MessageType.FIFO
    delayed = convert.to_wire(_view(delivery_timestamp_ms=1_700_000_009_000, message_type=MessageType.DELAY))
    assert convert.timestamp_ms(delayed.system_properties.delivery_timestamp) == 1_700_000_009_000
    dead = convert.to_wire(
        _view(
            topic="%DLQ%g",
            properties={props.DLQ_ORIGIN_TOPIC: "orders", props.DLQ_ORIGIN_MESSAGE_ID: "01ORIG"},
        )
    )
    assert dead.system_properties.dead_letter_queue.topic == "orders"
    assert dead.system_properties.dead_letter_queue.message_id == "01ORIG"
    assert dict(dead.user_properties) == {}


def test_round_trip_through_the_wire_keeps_the_message() -> None:
    view = _view()
    back = convert.to_message(pb.Message.FromString(convert.to_wire(view).SerializeToString()))
    assert (back.topic, back.body, back.tags, back.keys, back.message_id) == (
        view.topic,
        view.body,
        view.tags,
        view.keys,
        view.message_id,
    )
    assert dict(back.properties) == {"color": "red"}


def test_status_of_txmq_errors_carries_code_and_message() -> None:
    status = status_of(errors.MessageTooLarge("message body", 5, 4))
    assert status.code == errors.MESSAGE_BODY_TOO_LARGE
    assert "over the limit of 4 bytes" in status.message
    assert status_of(errors.InvalidReceiptHandle("expired")).code == pb.Code.INVALID_RECEIPT_HANDLE


def test_status_of_unknown_exception_is_internal_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    status = status_of(KeyError("boom"))
    assert status.code == pb.Code.INTERNAL_SERVER_ERROR
    assert "KeyError" in status.message
    assert "internal error" in caplog.text


def test_every_txmq_code_is_a_v2_code() -> None:
    known = {value.number for value in pb.definition.DESCRIPTOR.enum_types_by_name["Code"].values}
    ours = {getattr(errors, n) for n in dir(errors) if n.isupper() and isinstance(getattr(errors, n), int)}
    assert ours <= known


def test_route_entries_have_broker_zero_permission_and_accepted_types() -> None:
    where = routes.endpoints("127.0.0.1", 8081)
    entries = routes.route(routes.TopicRoute("orders", 3, tuple(MessageType)), "broker-a", where)
    assert [e.id for e in entries] == [0, 1, 2]
    for entry in entries:
        assert entry.broker.id == 0
        assert entry.permission == pb.Permission.READ_WRITE
        assert list(entry.accept_message_types) == [1, 2, 3, 4]
        assert entry.broker.endpoints.addresses[0].port == 8081
        assert entry.broker.endpoints.scheme == pb.AddressScheme.IPv4
    read_only = routes.TopicRoute("f", 1, (MessageType.FIFO,), readable=True, writable=False)
    fifo = routes.route(read_only, "b", where)
    assert list(fifo[0].accept_message_types) == [pb.MessageType.FIFO]
    assert fifo[0].permission == pb.Permission.READ
    assert routes.endpoints("localhost", 1).scheme == pb.AddressScheme.DOMAIN_NAME


def test_assignment_for_any_queue_is_id_minus_one() -> None:
    where = routes.endpoints("127.0.0.1", 8081)
    found = routes.assignments(
        routes.TopicRoute("orders", 4, tuple(MessageType)), [MessageQueue("orders", -1, "broker-a")], where
    )
    assert [a.message_queue.id for a in found] == [-1]


def test_producer_settings_reply_carries_max_body_size() -> None:
    client = pb.Settings(client_type=pb.ClientType.PRODUCER)
    client.publishing.topics.add(name="orders")
    reply = settings.producer_reply(client)
    assert reply.publishing.max_body_size == 4 * 1024 * 1024
    assert reply.publishing.validate_message_type
    assert reply.backoff_policy.max_attempts == 3
    assert convert.duration_ms(reply.backoff_policy.exponential_backoff.initial) == 10
    assert settings.published_topics(reply) == ["orders"]


def test_consumer_settings_reply_carries_group_policy() -> None:
    client = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER)
    client.subscription.group.name = "g"
    client.subscription.subscriptions.add().topic.name = "orders"
    reply = settings.consumer_reply(client, max_attempts=4, fifo=True)
    assert reply.subscription.fifo
    assert reply.subscription.receive_batch_size == 32
    assert reply.subscription.long_polling_timeout.seconds == 20
    assert reply.backoff_policy.max_attempts == 4
    assert reply.backoff_policy.WhichOneof("strategy") == "customized_backoff"
    assert [d.seconds for d in reply.backoff_policy.customized_backoff.next][:4] == [1, 5, 10, 30]
    custom = settings.consumer_reply(client, max_attempts=2, fifo=False, backoff_ms=(1_500, 10_000))
    assert [d.seconds for d in custom.backoff_policy.customized_backoff.next] == [1, 10]
    assert settings.subscribed_topics(custom) == ["orders"]
