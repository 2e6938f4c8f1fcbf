"""The SDK's pre-rendered SEND_MESSAGE_V2 headers give the very frames the generic encoder gives for
``headers.send_v2_fields`` (constant fields rendered once per queue, only time and properties per send)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client import _remoting_convert as conv
from txmq.client import _single
from txmq.client._remoting import RemotingTransport
from txmq.common import limits, names
from txmq.common import properties as props
from txmq.common.message import Message, MessageQueue
from txmq.protocol.remoting import frame, headers
from txmq.protocol.remoting.codes import RequestCode, SerializeType
from txmq.protocol.remoting.connection import RemotingConnection

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12)
_name = st.text('abcXYZ09_-%"\\é中', min_size=1, max_size=12)


def _generic_frame(
    mq: MessageQueue, group: str, queue_id: int, message: Message, born: int, mid: str, binary: bool = False
) -> bytes:
    ext = headers.send_v2_fields(
        group or "DEFAULT_PRODUCER", mq.topic, names.DEFAULT_TOPIC, limits.queues_per_topic_default,
        queue_id, conv.sys_flag_of(message), born,
        props.encode(conv.message_properties(message, mid, group)).decode("utf-8"), False, mq.broker_name,
    )  # fmt: skip
    serialize_type = SerializeType.ROCKETMQ if binary else SerializeType.JSON
    conn = RemotingConnection(first_opaque=41, serialize_type=serialize_type)
    return conn.send(conn.new_request(RequestCode.SEND_MESSAGE_V2, ext, bytes(message.body)))


def _pre_rendered(
    transport: RemotingTransport, mq: MessageQueue, message: Message, group: str, queue_id: int, binary: bool
) -> tuple[bytes, str]:
    """The frame the SDK writes for one message on a JSON or a ROCKETMQ (``binary``) channel, and its id."""
    if binary:
        conn = RemotingConnection(first_opaque=41, serialize_type=SerializeType.ROCKETMQ)
        ext, sent_body, mid = transport._single_binary_request(mq, message, group, queue_id)
        opaque, data = conn.send_binary_request(RequestCode.SEND_MESSAGE_V2, ext, sent_body)
    else:
        conn = RemotingConnection(first_opaque=41)
        ext_json, sent_body, mid = transport._single_request(mq, message, group, queue_id)
        opaque, data = conn.send_json_request(RequestCode.SEND_MESSAGE_V2, ext_json, sent_body)
    assert opaque == 41 and conn.pending == {41: RequestCode.SEND_MESSAGE_V2}
    return data, mid


@settings(max_examples=200, deadline=None)
@given(
    group=st.one_of(st.just(""), _name),
    topic=_name,
    broker=_name,
    queue_id=st.integers(-1, 1023),
    tags=st.one_of(st.none(), _name),
    keys=st.lists(_name, max_size=2),
    user=st.dictionaries(_name, _text, max_size=3),
    transactional=st.booleans(),
    body=st.binary(max_size=64),
)
def test_pre_rendered_header_frames_equal_the_generic_ones(
    group: str,
    topic: str,
    broker: str,
    queue_id: int,
    tags: str | None,
    keys: list[str],
    user: dict[str, str],
    transactional: bool,
    body: bytes,
) -> None:
    transport = RemotingTransport("127.0.0.1:9876")
    mq = MessageQueue(topic, max(queue_id, 0), broker)
    message = Message(topic, body, tags=tags, keys=tuple(keys), properties=user, transactional=transactional)
    for binary in (False, False, True, True):  # the second send reuses the rendered parts
        data, mid = _pre_rendered(transport, mq, message, group, queue_id, binary)
        born = int(frame.decode(data).ext_fields["g"])
        assert data == _generic_frame(mq, group, queue_id, message, born, mid, binary)


@settings(max_examples=200, deadline=None)
@given(
    group=st.one_of(st.just(""), _name),
    topic=_name,
    queue_id=st.integers(-1, 1023),
    transactional=st.booleans(),
    body=st.binary(max_size=64),
)
def test_plain_messages_take_the_property_template_and_give_the_generic_frames(
    group: str, topic: str, queue_id: int, transactional: bool, body: bytes
) -> None:
    """A message with no tags, keys, user properties, group or delay (every transaction's half in the
    benchmarks) has its properties laid from a template per producer group: the same frame."""
    transport = RemotingTransport("127.0.0.1:9876")
    mq = MessageQueue(topic, max(queue_id, 0), "broker-a")
    message = Message(topic, body, transactional=transactional)
    assert transport._headers.plain_properties(group, transactional) is not None
    assert transport._binary_headers.plain_properties(group, transactional) is not None
    for binary in (False, False, True, True):
        data, mid = _pre_rendered(transport, mq, message, group, queue_id, binary)
        born = int(frame.decode(data).ext_fields["g"])
        assert data == _generic_frame(mq, group, queue_id, message, born, mid, binary)


def test_a_template_that_does_not_split_once_falls_back_to_the_general_way() -> None:
    transport = RemotingTransport("127.0.0.1:9876")
    assert transport._headers.plain_properties("a<ID>b", True) is None  # no valid group holds "<"
    assert transport._binary_headers.plain_properties("a<ID>b", True) is None
    mq = MessageQueue("t", 0, "broker-a")
    message = Message("t", b"x", transactional=True)
    for binary in (False, True):
        data, mid = _pre_rendered(transport, mq, message, "a<ID>b", 0, binary)
        born = int(frame.decode(data).ext_fields["g"])
        assert data == _generic_frame(mq, "a<ID>b", 0, message, born, mid, binary)


@pytest.mark.parametrize("now_s", [99_999_999.999, 1_800_000_000.0, 10_000_000_000.0])
@pytest.mark.parametrize("group", ["", "pg", "é"])
def test_a_plain_binary_header_from_cached_pairs_or_a_born_time_of_other_digits(
    monkeypatch: pytest.MonkeyPatch, now_s: float, group: str
) -> None:
    """A plain message's binary header is laid from the group's cached pair bytes when the born time
    has 13 digits (every date from 2001 to 2286) and by ``binary_pair`` otherwise: the same frame."""
    monkeypatch.setattr(time, "time", lambda: now_s)
    transport = RemotingTransport("127.0.0.1:9876")
    mq = MessageQueue("T", 3, "broker-a")
    for transactional in (False, True, False):
        message = Message("T", b"body", transactional=transactional)
        data, mid = _pre_rendered(transport, mq, message, group, 3, True)
        born = int(frame.decode(data).ext_fields["g"])
        assert born == int(now_s * 1000)
        assert data == _generic_frame(mq, group, 3, message, born, mid, True)
    if _single._PLAIN_SINGLE is None:  # request_py lays the cached pair bytes for 13 digits only
        assert bool(transport._binary_headers._plain_bytes) == (len(str(int(now_s * 1000))) == 13)
    else:  # the C call's parts are made up front; it declines other digit counts (the frames above)
        assert transport._binary_headers._plain_frames
