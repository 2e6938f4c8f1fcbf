"""The C scan of a SendMessageRequest stores and answers what the Python send path does.

``protocol/grpc/_sendscan.c`` reads a plain request straight into the send lane's columns and
``SendService.lane_columns`` (a batch) or ``SendService.lane_one`` (one message) appends them; the
reference is the door without the C module (as with ``TXMQ_PURE=1``): ``wire.send_lane``,
``checks.check_lean`` and ``SendService._lane_batch`` / ``lane_append`` (or protobuf's parse and the
general path). Two brokers on one FakeClock get the same requests through ``MessagingServicer``, one
with the scan and one without: every answer, and every byte of their commit logs, ConsumeQueues and key
index, agree, on generated requests both plain and not (user properties, message groups, odd tags,
keys and ids, other types and encodings, unknown fields, cut and damaged bytes).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.filtering import tag_hash
from txmq.common import limits
from txmq.common.clock import FakeClock
from txmq.protocol.grpc import checks, pb, wire
from txmq.server import grpc_server
from txmq.server.grpc_server import MessagingServicer
from txmq.storage.api import FlushMode

S = pb.service
SCAN = grpc_server._SENDSCAN
needs_scan = pytest.mark.skipif(SCAN is None, reason="the C scan is not built (pure Python)")
TAIL = b"__TXMQ_TYPE\x01NORMAL\x02"
_LIMITS = grpc_server._SCAN_LIMITS

# (what clients send, what the scan declines: the Python path's to judge)
_TAGS = (["", "t", "tag-1"], [" t", "t ", "a|b", "é", "\x01", " ", "x" * 1025])
_KEYS = (["k1", "k2"], ["k 2", "", " ", "é", "\t", "x" * 1025])
_IDS = (["ID-1", "ID-2", "ID-3"], ["", " ", "a b", "é", "\x02"])
_HOSTS = (["", "10.0.0.2", "10.0.0.3"], ["é"])
_BODIES = ([b"x", b"body" * 64, b"\x00\x01\x02"], [b""])
_TOPICS = (["ScanG"], ["Other", "", "bad topic"])


_ODD = [
    "body", "topic", "namespace", "user", "tag", "keys", "id", "host", "group", "type", "encoding",
    "digest", "trace", "delivery",
]  # fmt: skip


@st.composite
def _odd_messages(draw: st.DrawFn) -> Any:
    return draw(_messages(set(draw(st.lists(st.sampled_from(_ODD), min_size=1, max_size=2)))))


@st.composite
def _messages(draw: st.DrawFn, odd: set[str]) -> Any:
    """A v2 Message as clients send it, but for the ``odd`` fields (_ODD): values the scan declines."""

    def pick(name: str, values: tuple[list[Any], list[Any]]) -> Any:
        return draw(st.sampled_from(values[1] if name in odd else values[0]))

    message = pb.Message(body=pick("body", _BODIES))
    message.topic.name = pick("topic", _TOPICS)
    if "namespace" in odd:
        message.topic.resource_namespace = draw(st.sampled_from(["", "ns", "é"]))
    if "user" in odd:
        message.user_properties[draw(st.sampled_from(["a", "DELAY", "é"]))] = draw(st.sampled_from(["v", ""]))
    sysp = message.system_properties
    sysp.tag = pick("tag", _TAGS)
    keys = [pick("", _KEYS) for _ in range(draw(st.integers(0, 3)))]
    if "keys" in odd:
        keys.insert(draw(st.integers(0, len(keys))), pick("keys", _KEYS))
    sysp.keys.extend(keys)
    sysp.message_id = pick("id", _IDS)
    sysp.born_host = pick("host", _HOSTS)
    if "group" in odd:
        sysp.message_group = draw(st.sampled_from(["g", ""]))
    sysp.message_type = pick("type", ([0, 1], [2, 3, 4]))
    sysp.body_encoding = pick("encoding", ([0, 1], [2]))
    if draw(st.booleans()):
        sysp.born_timestamp.seconds = draw(st.integers(0, 2**34))
        sysp.born_timestamp.nanos = draw(st.integers(0, 999_999_999))
    if draw(st.booleans()) or "digest" in odd:
        sysp.body_digest.type = 1
        sysp.body_digest.checksum = pick("digest", (["abc"], ["é"]))
    if draw(st.integers(0, 4)) == 0 or "trace" in odd:
        sysp.trace_context = pick("trace", (["00-ab"], ["é"]))
    if "delivery" in odd:
        sysp.delivery_timestamp.seconds = 5
    return message


@st.composite
def _requests(draw: st.DrawFn) -> bytes:
    """Requests as clients send them, and such requests with one message changed (_ODD)."""
    messages = draw(st.lists(_messages(set()), min_size=1, max_size=4))
    if draw(st.integers(0, 3)) > 0:
        messages[draw(st.integers(0, len(messages) - 1))] = draw(_odd_messages())
    data = bytes(S.SendMessageRequest(messages=messages).SerializeToString())
    damage = draw(st.sampled_from(["none"] * 12 + ["cut", "flip", "tail"]))
    if damage == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif damage == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    elif damage == "tail":
        data += draw(st.binary(min_size=1, max_size=6))
    return data


class _Context:
    """What the door reads of a grpc.aio context."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-mq-client-id", "scan@1"),)

    def peer(self) -> str:
        return "ipv4:10.0.0.9:4242"


@pytest.fixture(scope="module")
def brokers(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Broker, Broker, Path]]:
    clock = FakeClock(start_ms=1_800_000_000_000)
    with tempfile.TemporaryDirectory() as tmp:

        async def open_one(name: str) -> Broker:
            config = BrokerConfig(
                data_dir=str(Path(tmp) / name), flush=FlushMode.ASYNC, segment_bytes=64 << 20
            )
            broker = await Broker.open(config, clock=clock)
            broker.topics.create("ScanG", queues=4)
            return broker

        pair = (loop.run_until_complete(open_one("python")), loop.run_until_complete(open_one("scan")))
        yield pair[0], pair[1], Path(tmp)
        for broker in pair:
            loop.run_until_complete(broker.close())


def _answer(broker: Broker, data: bytes, scan: object, loop: asyncio.AbstractEventLoop) -> bytes:
    """The serialized answer of the broker's gRPC door to ``data``, with ``scan`` as the C module."""
    saved = grpc_server._SENDSCAN
    grpc_server._SENDSCAN = scan
    try:
        servicer = MessagingServicer(broker, "127.0.0.1", 8081)
        reply = loop.run_until_complete(servicer.SendMessage(data, _Context()))
        loop.run_until_complete(asyncio.sleep(0))  # the group's write and dispatch (ASYNC)
    finally:
        grpc_server._SENDSCAN = saved
    return reply if reply.__class__ is bytes else bytes(reply.SerializeToString(deterministic=True))


def _files(root: Path) -> dict[str, bytes]:
    """Every store file's bytes but the checkpoint's, each up to its last non-zero byte."""
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if (
            path.is_file()
            and "config" not in path.parts
            and path.name != "lock"
            and not path.name.startswith("checkpoint")
        ):
            out[str(path.relative_to(root))] = path.read_bytes().rstrip(b"\x00")
    return out


def _plain(count: int, tag: str = "t", keys: tuple[str, ...] = ()) -> bytes:
    """A request as the official clients send it."""
    messages = []
    for i in range(count):
        message = pb.Message(body=b"x" * 100)
        message.topic.name = "ScanG"
        sysp = message.system_properties
        sysp.tag = tag
        sysp.keys.extend(keys)
        sysp.message_id = f"ID-PLAIN-{i}"
        sysp.born_host = "10.0.0.2"
        sysp.born_timestamp.seconds = 1_800_000_000
        sysp.born_timestamp.nanos = 5
        sysp.message_type = pb.MessageType.NORMAL
        sysp.body_encoding = pb.Encoding.IDENTITY
        sysp.body_digest.type = 1
        sysp.body_digest.checksum = "0cc175b9c0f1b6a831c399e269772661"
        messages.append(message)
    return bytes(S.SendMessageRequest(messages=messages).SerializeToString())


@needs_scan
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_requests())
@example(data=_plain(1))
@example(data=_plain(3, "", ("k1", "k2")))
def test_the_scan_stores_and_answers_what_the_python_path_does(
    brokers: tuple[Broker, Broker, Path], loop: asyncio.AbstractEventLoop, data: bytes
) -> None:
    python, scanned, root = brokers
    event("scanned" if SCAN.send_scan(data, TAIL, *_LIMITS) is not None else "declined")
    expected = _answer(python, data, None, loop)
    got = _answer(scanned, data, SCAN, loop)
    assert got == expected
    for queue in range(4):
        assert python.store.max_offset("ScanG", queue) == scanned.store.max_offset("ScanG", queue)
    assert _files(root / "scan") == _files(root / "python")


@needs_scan
@settings(max_examples=800, deadline=None)
@given(data=_requests())
def test_a_scanned_request_is_what_send_lane_and_check_lean_read(data: bytes) -> None:
    """Whatever the scan takes, ``wire.send_lane`` takes too, ``check_lean`` passes unchanged, and
    the columns are the lane's layout of those messages."""
    scan = SCAN.send_scan(data, TAIL, *_LIMITS)
    if scan is None:
        return
    topic, born_host, (bodies, encoded, codes, index_keys, ids, total) = scan
    decoded = wire.send_lane(data)
    assert decoded is not None
    assert (topic, born_host) == (decoded[0], decoded[2])
    lane = decoded[1]
    assert checks.check_lean(lane) is lane
    assert list(bodies) == [m.body for m in lane]
    assert ids == [m.message_id for m in lane]
    assert list(codes) == [tag_hash(m.tags) for m in lane]
    assert list(index_keys) == [(*m.keys, m.message_id) for m in lane]
    assert total == sum(len(m.body) for m in lane)
    for properties, m in zip(encoded, lane, strict=True):
        assert not m.properties and m.message_group is None
        layout = f"TAGS\x01{m.tags}\x02" if m.tags else ""
        if m.keys:
            layout += f"KEYS\x01{' '.join(m.keys)}\x02"
        assert properties == (layout + f"UNIQ_KEY\x01{m.message_id}\x02").encode() + TAIL


@needs_scan
def test_what_clients_send_is_scanned_and_the_unusual_is_declined() -> None:
    for count in (1, 2, 100):
        scan = SCAN.send_scan(_plain(count, "t", ("k1",)), TAIL, *_LIMITS)
        assert scan is not None
        assert scan[0] == "ScanG" and scan[1] == "10.0.0.2"
        assert scan[2][4] == [f"ID-PLAIN-{i}" for i in range(count)]
    plain = S.SendMessageRequest.FromString(_plain(2))
    variants = []
    for change in ("group", "user", "gzip", "transaction", "no id", "delivery", "tag bar"):
        request = S.SendMessageRequest()
        request.CopyFrom(plain)
        sysp = request.messages[1].system_properties
        if change == "group":
            sysp.message_group = "g"
        elif change == "user":
            request.messages[1].user_properties["a"] = "1"
        elif change == "gzip":
            sysp.body_encoding = pb.Encoding.GZIP
        elif change == "transaction":
            sysp.message_type = pb.MessageType.TRANSACTION
        elif change == "no id":
            sysp.message_id = ""
        elif change == "delivery":
            sysp.delivery_timestamp.seconds = 5
        else:
            sysp.tag = "a|b"
        variants.append(bytes(request.SerializeToString()))
    data = _plain(2)
    variants += [b"", data[:-1], data + b"\x12\x00", b"\x0a\x00"]
    for variant in variants:
        assert SCAN.send_scan(variant, TAIL, *_LIMITS) is None, variant
    tight = (limits.body_bytes_max, 1, 64, 1024, 128, 32768)  # a tag of at most one byte
    assert SCAN.send_scan(data, TAIL, *tight) is not None
    assert SCAN.send_scan(_plain(2, "tt"), TAIL, *tight) is None
    assert SCAN.send_scan(data, TAIL, *(99, *tight[1:])) is None  # bodies of 100 bytes


@needs_scan
@settings(max_examples=500, deadline=None)
@given(
    ids=st.lists(st.text(max_size=140), max_size=5),
    offsets=st.lists(st.integers(-5, 2**64), max_size=5),
    kind=st.sampled_from(["list", "tuple", "range"]),
)
@example(ids=["ID-1"], offsets=[0], kind="list")
@example(ids=["", "x" * 130], offsets=[1 << 14, (1 << 28) - 1], kind="tuple")
@example(ids=["a", "b"], offsets=[(1 << 63) - 1], kind="range")
@example(ids=["a"], offsets=[2**63], kind="list")
def test_the_c_reply_is_wire_lane_reply(ids: list[str], offsets: list[int], kind: str) -> None:
    """``lane_reply`` writes ``wire.lane_reply``'s bytes, or None (an id not ASCII, an offset out of
    0..2**63-1, columns of unequal length) for the reference to write or refuse. The offsets of a
    batch in one queue are a ``range``."""
    offsets = offsets[: len(ids)] + [7] * (len(ids) - len(offsets))
    column: Any = offsets
    if kind == "tuple":
        column = tuple(offsets)
    elif kind == "range":
        column = range(offsets[0], offsets[0] + len(ids)) if ids else range(0)
        offsets = list(column)
    got = SCAN.lane_reply(grpc_server._OK_FIELD, tuple(ids) if kind == "tuple" else ids, column)
    if all(i.isascii() for i in ids) and all(0 <= o < 2**63 for o in offsets):
        assert got == wire.lane_reply(ids, offsets)
    else:
        assert got is None
    assert SCAN.lane_reply(grpc_server._OK_FIELD, [*ids, "x"], column) is None
    assert SCAN.lane_reply(grpc_server._OK_FIELD, iter(ids), column) is None
