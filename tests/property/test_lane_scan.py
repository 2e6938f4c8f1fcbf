"""The C scan of a SEND_BATCH_MESSAGE body stores and answers what the Python batch path does.

``server/remoting/_lanescan.c`` reads a plain batch body straight into the send lane's columns and
``SendService.lane_columns`` appends them; the reference is the path without the C module (as with
``TXMQ_PURE=1``): ``convert.lean_batch`` (or ``decode_batch_entries`` + ``to_lean``) and
``SendService._lane_batch`` (or message by message). Two brokers on one FakeClock get the same
requests through the remoting handler, one with the scan and one without: every answer frame, and
every byte of their commit logs, ConsumeQueues and key index, agree, on generated batches both
plain and not (malformed entries, odd property bytes, limits exceeded, delayed or FIFO entries).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.filtering import tag_hash
from txmq.common import limits, msgid
from txmq.common import properties as props
from txmq.common.clock import FakeClock
from txmq.common.message import Message, MessageQueue
from txmq.protocol.remoting import headers
from txmq.protocol.remoting.codes import RequestCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.connection import RemotingConnection
from txmq.server.remoting import producer
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.convert import lean_batch
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint
from txmq.storage.api import FlushMode

SCAN = producer._LANESCAN
needs_scan = pytest.mark.skipif(SCAN is None, reason="the C scan is not built (pure Python)")

_NAMES = st.sampled_from(
    [
        props.TAGS, props.KEYS, props.PRODUCER_GROUP, props.WAIT_STORE_MSG_OK,
        props.MESSAGE_TYPE, props.SHARDING_KEY, props.DELAY, props.TRAN_MSG, "__SHARDING_KEY", "a", "b",
        "user.x", "", "é", "TAGSX",
    ]
)  # fmt: skip
_VALUES = st.sampled_from(
    ["", "t", "tag-1", " t", "a||b", "k1 k2", "  k1  k2 ", "ID-1", "ID-2", "é", "v", "x" * 1100, "\t"]
)
_VALUES |= st.text(alphabet=st.sampled_from("ab \x01|"), max_size=5)
_BODIES = st.sampled_from([b"", b"x", b"body" * 64, b"\x00\x01\x02"])


def _entry(body: bytes, properties: bytes, flag: int = 0) -> bytes:
    total = 20 + len(body) + 2 + len(properties)
    return (
        struct.pack(">iiiii", total, 0, 0, flag, len(body))
        + body
        + struct.pack(">H", len(properties))
        + properties
    )


@st.composite
def entry_properties(draw: st.DrawFn) -> bytes:
    """An entry's properties: a message id (without one the broker makes one: the two paths would
    differ by it) and a few (often system) pairs, at times odd."""
    pairs = draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=4))
    pairs.insert(draw(st.integers(0, len(pairs))), (props.UNIQ_KEY, f"ID-{draw(st.integers(0, 99))}"))
    text = "".join(f"{name}\x01{value}\x02" for name, value in pairs)
    odd = draw(st.sampled_from(["", "", "", "", "no-last-sep", "double-sep", "bare-name", "bad-utf8"]))
    if odd == "no-last-sep":
        text = text[:-1]
    elif odd == "double-sep":
        text = text.replace("\x02", "\x02\x02", 1)
    elif odd == "bare-name":
        text += "NAME\x02"
    elif odd == "bad-utf8":
        return text.encode() + b"\xff\x02"
    return text.encode()


@st.composite
def plain_properties(draw: st.DrawFn) -> bytes:
    """What clients send: a message id, now and then a tag, keys, user pairs and the producer group."""
    pairs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", "user.x", props.TAGS, props.KEYS, props.PRODUCER_GROUP, "WAIT"]),
                st.sampled_from(["", "v", "t", "k1 k2", " k1  k2 ", "tag-1", "x y"]),
            ),
            max_size=3,
            unique_by=lambda pair: pair[0],
        )
    )
    pairs.insert(draw(st.integers(0, len(pairs))), (props.UNIQ_KEY, f"ID-{draw(st.integers(0, 99))}"))
    return "".join(f"{name}\x01{value}\x02" for name, value in pairs).encode()


@st.composite
def batch_bodies(draw: st.DrawFn) -> bytes:
    plain = draw(st.booleans())
    properties = plain_properties() if plain else entry_properties()
    bodies = st.sampled_from([b"x", b"body" * 64, b"\x00\x01\x02"]) if plain else _BODIES
    entries = draw(st.lists(st.tuples(bodies, properties), min_size=0, max_size=4))
    data = b"".join(_entry(body, properties) for body, properties in entries)
    damage = draw(st.sampled_from(["none"] * 6 + ["cut", "total", "tail"]))
    if damage == "cut" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == "total" and data:
        data = struct.pack(">i", draw(st.integers(-3, len(data) + 3))) + data[4:]
    elif damage == "tail":
        data += draw(st.binary(min_size=1, max_size=21))
    return data


class _Sink(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("10.0.0.1", 4242) if name == "peername" else default


@pytest.fixture(scope="module")
def brokers(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Broker, Broker, Path]]:
    clock = FakeClock(start_ms=1_800_000_000_000)
    with tempfile.TemporaryDirectory() as tmp:

        async def open_one(name: str) -> Broker:
            config = BrokerConfig(
                data_dir=str(Path(tmp) / name), flush=FlushMode.ASYNC, segment_bytes=64 << 20
            )
            broker = await Broker.open(config, clock=clock)
            broker.topics.create("ScanA", queues=4)
            return broker

        pair = (loop.run_until_complete(open_one("python")), loop.run_until_complete(open_one("scan")))
        yield pair[0], pair[1], Path(tmp)
        for broker in pair:
            loop.run_until_complete(broker.close())


def _answer(broker: Broker, frame: bytes, scan: object, loop: asyncio.AbstractEventLoop) -> bytes:
    """The bytes the broker's remoting door writes for ``frame``, with ``scan`` as the C module."""
    saved = producer._LANESCAN
    producer._LANESCAN = scan
    sink = _Sink()
    try:

        async def exchange() -> None:
            endpoint = RemotingEndpoint(make_handler(RemotingContext(broker, "127.0.0.1:10911")))
            endpoint.connection_made(sink)
            endpoint.data_received(frame)
            for _ in range(200):
                if sink.data:
                    break
                await asyncio.sleep(0)
            await asyncio.sleep(0)  # the group's write and dispatch (ASYNC) at the end of the turn

        loop.run_until_complete(exchange())
    finally:
        producer._LANESCAN = saved
    assert sink.data, "no answer"
    return bytes(sink.data)


def _files(root: Path) -> dict[str, bytes]:
    """Every store file's bytes but the checkpoint's (written by a thread of its own, when it will);
    each up to its last non-zero byte (a commit log segment's tail is zeros)."""
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


def _frame(body: bytes, producer_group: str, queue_id: int, sys_flag: int) -> bytes:
    """A SEND_BATCH_MESSAGE as the SDK frames it (``headers.send_v2_fields``, ROCKETMQ header)."""
    conn = RemotingConnection(serialize_type=SerializeType.ROCKETMQ)
    ext = headers.send_v2_fields(producer_group, "ScanA", "TBW102", 4, queue_id, sys_flag, 1, None, True, "b")
    return conn.send(conn.new_request(RequestCode.SEND_BATCH_MESSAGE, ext, body))


@needs_scan
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=batch_bodies(),
    producer_group=st.sampled_from(["PG", "PG", "", "pg\x01x", "é"]),
    queue_id=st.sampled_from([0, 0, 2, -1, 9]),
    sys_flag=st.sampled_from([0, 0, 0, 4]),
)
@example(body=_entry(b"x", b"UNIQ_KEY\x01A\x02") * 2, producer_group="PG", queue_id=0, sys_flag=0)
@example(
    body=_entry(b"x", b"a\x011\x02TAGS\x01t\x02KEYS\x01 k1  k2 \x02UNIQ_KEY\x01A\x02b\x01\x02PGROUP\x01z\x02")
    + _entry(b"y", b"UNIQ_KEY\x01B\x02TAGS\x01\x02KEYS\x01  \x02"),
    producer_group="PG", queue_id=-1, sys_flag=0,
)  # fmt: skip
def test_the_scan_stores_and_answers_what_the_python_path_does(
    brokers: tuple[Broker, Broker, Path],
    loop: asyncio.AbstractEventLoop,
    body: bytes,
    producer_group: str,
    queue_id: int,
    sys_flag: int,
) -> None:
    python, scanned, root = brokers
    frame = _frame(body, producer_group, queue_id, sys_flag)
    took_scan = (
        sys_flag == 0
        and scanned.sender.lane_tail(producer_group or None) is not None
        and SCAN.lane_scan(body, scanned.sender.lane_tail(producer_group or None), *_LIMITS) is not None
    )
    event("scanned" if took_scan else "declined")
    expected = _answer(python, frame, None, loop)
    got = _answer(scanned, frame, SCAN, loop)
    assert got == expected
    assert python.store.max_offset("ScanA", max(queue_id, 0)) == scanned.store.max_offset(
        "ScanA", max(queue_id, 0)
    )
    assert _files(root / "scan") == _files(root / "python")


_LIMITS = (
    limits.body_bytes_max, limits.tag_bytes_max, limits.keys_count_max, limits.key_bytes_max,
    limits.property_count_max, limits.properties_bytes_max,
)  # fmt: skip


@needs_scan
@settings(max_examples=600, deadline=None)
@given(body=batch_bodies(), tail=st.sampled_from([b"", b"PGROUP\x01PG\x02__TXMQ_TYPE\x01NORMAL\x02"]))
def test_a_scanned_batch_is_what_lean_batch_reads(body: bytes, tail: bytes) -> None:
    """Whatever the scan takes, ``lean_batch`` takes too and reads the same messages; each record's
    properties are the lane's layout of them (user pairs, TAGS, KEYS, UNIQ_KEY, then ``tail``)."""
    scan = SCAN.lane_scan(body, tail, *_LIMITS)
    if scan is None:
        return
    bodies, encoded, codes, index_keys, ids, total = scan
    lane = lean_batch(body, 0)
    assert lane is not None
    assert list(bodies) == [m.body for m in lane]
    assert ids == [m.message_id for m in lane]
    assert list(codes) == [tag_hash(m.tags) for m in lane]
    assert list(index_keys) == [(*m.keys, m.message_id) for m in lane]
    assert total == sum(len(m.body) for m in lane)
    for properties, m in zip(encoded, lane, strict=True):
        layout = props.encode(m.properties) if m.properties else b""
        if m.tags:
            layout += f"{props.TAGS}\x01{m.tags}\x02".encode()
        if m.keys:
            layout += f"{props.KEYS}\x01{' '.join(m.keys)}\x02".encode()
        assert properties == layout + f"{props.UNIQ_KEY}\x01{m.message_id}\x02".encode() + tail


@needs_scan
@pytest.mark.parametrize(
    "properties",
    [
        b"",
        b"TAGS\x01t\x02",
        b"UNIQ_KEY\x01\x02",
        b"UNIQ_KEY\x01A\x02UNIQ_KEY\x01\x02",
        b"UNIQ_KEY\x01A\x01\x02",
    ],
)
def test_an_entry_without_a_message_id_is_declined(properties: bytes) -> None:
    """No id (the broker makes one), an empty one, or one holding a separator: the Python path's."""
    body = _entry(b"x", b"UNIQ_KEY\x01B\x02") + _entry(b"y", properties)
    assert SCAN.lane_scan(body, b"", *_LIMITS) is None
    assert SCAN.lane_scan(_entry(b"x", b"UNIQ_KEY\x01B\x02") * 2, b"", *_LIMITS) is not None


@needs_scan
def test_what_the_sdk_sends_is_scanned() -> None:
    """The SDK's batches (plain, tagged, keyed, with user properties) take the C scan."""
    from txmq.client._remoting import RemotingTransport

    transport = RemotingTransport("127.0.0.1:9876")
    mq = MessageQueue("ScanA", 0, "broker-a")
    kinds = [
        [Message("ScanA", b"x" * 1024) for _ in range(100)],
        [Message("ScanA", b"y", tags="t", keys=("k1", "k2"), properties={"a": "1"}) for _ in range(3)],
    ]
    for messages in kinds:
        _, _, body, ids = transport._send_request(mq, messages, "PG", 0)
        scan = SCAN.lane_scan(body, b"PGROUP\x01PG\x02", *_LIMITS)
        assert scan is not None
        assert scan[4] == ids


@needs_scan
def test_the_scan_knows_the_system_properties() -> None:
    """The names the C scan takes, declines and drops are the system properties (and the ali-ons
    sharding key, declined as ``lean_batch`` declines it)."""
    taken, declined, dropped = SCAN.lane_names()
    assert set(taken) == {props.TAGS, props.KEYS, props.UNIQ_KEY}
    assert set(declined) == {
        props.SHARDING_KEY, props.DELAY, props.TRAN_MSG, props.TIMER_DELIVER_MS,
        props.CHECK_IMMUNITY_TIME_IN_SECONDS, "__SHARDING_KEY",
    }  # fmt: skip
    assert set(taken) | set(declined) | set(dropped) == props.SYSTEM_KEYS | {"__SHARDING_KEY"}
    assert len(taken) + len(declined) + len(dropped) == len(props.SYSTEM_KEYS) + 1


_SEQUENCES = st.sampled_from([0, 7, 0xFFFFFFFF, 0x1_0000_0003, 0xABCDEF01])
_ID_PAIR = re.compile("UNIQ_KEY\x01ID-[0-9]+(\x02|$)")


def _with_id(properties: str, message_id: str) -> str:
    """``properties`` (holding the generated ``UNIQ_KEY`` pair) with the id ``kept``, ``dropped`` (the
    pair taken out) or ``empty`` (its value)."""
    if message_id == "dropped":
        return _ID_PAIR.sub("", properties)
    if message_id == "empty":
        return _ID_PAIR.sub("UNIQ_KEY\x01\\1", properties)
    return properties


@contextmanager
def _sequence_at(start: int) -> Iterator[None]:
    """The message ids' sequence numbers drawn from ``start`` on (``msgid.new_message_id`` and
    ``msgid.next_sequence`` read ``msgid._next_sequence``), then as before."""
    saved = msgid._next_sequence
    msgid._next_sequence = itertools.count(start).__next__
    try:
        yield
    finally:
        msgid._next_sequence = saved


def _single_frame(body: bytes, properties: str, producer_group: str, queue_id: int, sys_flag: int) -> bytes:
    """A SEND_MESSAGE_V2 as the SDK frames a single message (ROCKETMQ header)."""
    conn = RemotingConnection(serialize_type=SerializeType.ROCKETMQ)
    ext = headers.send_v2_fields(
        producer_group, "ScanA", "TBW102", 4, queue_id, sys_flag, 1, properties, False, "b"
    )
    return conn.send(conn.new_request(RequestCode.SEND_MESSAGE_V2, ext, body))


@needs_scan
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=_BODIES,
    properties=st.one_of(plain_properties(), entry_properties()).map(
        lambda data: data.decode("utf-8", "replace")
    ),
    producer_group=st.sampled_from(["PG", "PG", "", "pg\x01x", "é"]),
    queue_id=st.sampled_from([0, 0, 2, -1, 9]),
    sys_flag=st.sampled_from([0, 0, 0, 4, 1]),
    message_id=st.sampled_from(["kept", "kept", "dropped", "empty"]),
    sequence=_SEQUENCES,
)
@example(
    body=b"x",
    properties="a\x011\x02TAGS\x01t\x02KEYS\x01 k1  k2 \x02UNIQ_KEY\x01A\x02b\x01\x02PGROUP\x01z\x02",
    producer_group="PG", queue_id=-1, sys_flag=0, message_id="kept", sequence=0,
)  # fmt: skip
@example(
    body=b"x", properties="UNIQ_KEY\x01A\x02", producer_group="PG", queue_id=9, sys_flag=0, message_id="kept",
    sequence=0,
)  # fmt: skip
@example(
    body=b"x" * 1024, properties="TAGS\x01bench\x02", producer_group="PG", queue_id=-1, sys_flag=0,
    message_id="kept", sequence=0xFFFFFFFF,
)  # fmt: skip
@example(
    body=b"x", properties="", producer_group="", queue_id=0, sys_flag=0, message_id="kept",
    sequence=0xABCDEF01,
)  # fmt: skip
def test_the_single_scan_stores_and_answers_what_the_python_path_does(
    brokers: tuple[Broker, Broker, Path],
    loop: asyncio.AbstractEventLoop,
    body: bytes,
    properties: str,
    producer_group: str,
    queue_id: int,
    sys_flag: int,
    message_id: str,
    sequence: int,
) -> None:
    """A single SEND_MESSAGE_V2 through ``_lanescan.one_scan`` and ``SendService.lane_one``: the same
    answer bytes and store files as through ``_messages`` and ``lane_append`` (the reference); with
    its id, without one or with an empty one (the broker makes it: each broker's ids drawn from the
    same sequence number here, so the two stores hold the same ids)."""
    python, scanned, root = brokers
    properties = _with_id(properties, message_id)
    frame = _single_frame(body, properties, producer_group, queue_id, sys_flag)
    tail = scanned.sender.lane_tail(producer_group or None)
    took_scan = (
        sys_flag == 0
        and tail is not None
        and SCAN.one_scan(body, properties, tail, *_LIMITS, True) is not None
    )
    event(f"scanned, id {message_id}" if took_scan else "declined")
    with _sequence_at(sequence):
        expected = _answer(python, frame, None, loop)
    with _sequence_at(sequence):
        got = _answer(scanned, frame, SCAN, loop)
    assert got == expected
    assert python.store.max_offset("ScanA", max(queue_id, 0)) == scanned.store.max_offset(
        "ScanA", max(queue_id, 0)
    )
    assert _files(root / "scan") == _files(root / "python")


@needs_scan
@settings(max_examples=600, deadline=None)
@given(
    body=_BODIES,
    properties=st.one_of(plain_properties(), entry_properties()).map(
        lambda data: data.decode("utf-8", "replace")
    ),
    tail=st.sampled_from([b"", b"PGROUP\x01PG\x02__TXMQ_TYPE\x01NORMAL\x02"]),
)
def test_a_scanned_single_is_what_a_one_entry_batch_scan_reads(
    body: bytes, properties: str, tail: bytes
) -> None:
    """``one_scan`` of a body and its properties gives what ``lane_scan`` gives for a batch of that
    one entry (the body kept, not copied), or None where it declines, and None for a body that is not
    bytes or properties that are not ASCII."""
    one = SCAN.one_scan(body, properties, tail, *_LIMITS)
    data = properties.encode()
    batch = SCAN.lane_scan(_entry(body, data), tail, *_LIMITS) if len(data) < 1 << 16 else None
    if not properties.isascii():
        assert one is None
        return
    assert one == batch
    if one is not None:
        assert one[0][0] is body
    assert SCAN.one_scan(bytearray(body), properties, tail, *_LIMITS) is None


@needs_scan
@settings(max_examples=600, deadline=None)
@given(
    body=_BODIES,
    properties=st.one_of(plain_properties(), entry_properties()).map(
        lambda data: data.decode("utf-8", "replace")
    ),
    message_id=st.sampled_from(["kept", "dropped", "empty"]),
    tail=st.sampled_from([b"", b"PGROUP\x01PG\x02__TXMQ_TYPE\x01NORMAL\x02"]),
    now=st.sampled_from([0, 1_800_000_000_000, 1_609_459_200_000 + (1 << 32) * 1000 - 1]),
    sequence=_SEQUENCES,
)
def test_a_keyless_single_is_scanned_as_if_it_carried_the_id_the_lane_makes(
    body: bytes, properties: str, message_id: str, tail: bytes, now: int, sequence: int
) -> None:
    """``one_scan(..., keyless=True)``: a message with an id as without the flag; one without an id
    (or with an empty one), once ``keyless_fill`` gives it the id ``msgid.new_message_id`` makes
    for the same sequence number, is what ``lane_scan`` reads of it with that id as its last pair
    (the limits counting the id's 34 characters), or None where that declines."""
    properties = _with_id(properties, message_id)
    one = SCAN.one_scan(body, properties, tail, *_LIMITS, True)
    if not properties.isascii():
        assert one is None
        return
    keyed = SCAN.one_scan(body, properties, tail, *_LIMITS)
    if keyed is not None:
        assert one == keyed
        return
    with _sequence_at(sequence):
        made = msgid.new_message_id(now)
    ended = properties if properties.endswith("\x02") or not properties else properties + "\x02"
    data = f"{ended}UNIQ_KEY\x01{made}\x02".encode()
    batch = SCAN.lane_scan(_entry(body, data), tail, *_LIMITS) if len(data) < 1 << 16 else None
    if one is None:
        assert batch is None
        return
    assert one[4] == []
    assert batch is not None
    bodies, head, codes, keys, _, total = one
    assert bodies[0] is body
    with _sequence_at(sequence):
        filled = SCAN.keyless_fill(head[0], keys[0], tail, msgid.id_prefix(now), msgid.next_sequence())
    assert filled == (batch[1][0], batch[3][0], made)
    assert (bodies, codes, total) == (batch[0], batch[2], batch[5])
    assert batch[4] == [made]


@needs_scan
def test_keyless_fill_refuses_what_is_not_an_id() -> None:
    """``keyless_fill`` never declines (the id is drawn when it runs): odd arguments raise."""
    prefix = msgid.id_prefix(1_800_000_000_000)
    assert SCAN.keyless_fill(b"UNIQ_KEY\x01", (), b"", prefix, 0)[2] == prefix + "00000000"
    for args in (
        (bytearray(b"h"), (), b"", prefix, 0),
        (b"h", ["k"], b"", prefix, 0),
        (b"h", (), bytearray(), prefix, 0),
        (b"h", (), b"", prefix.encode(), 0),
        (b"h", (), b"", prefix, 1.0),
    ):
        with pytest.raises(TypeError):
            SCAN.keyless_fill(*args)
    for args in ((b"h", (), b"", prefix[:-1], 0), (b"h", (), b"", prefix[:-1] + "é", 0),
                 (b"h", (), b"", prefix, 1 << 32)):  # fmt: skip
        with pytest.raises(ValueError):
            SCAN.keyless_fill(*args)
    with pytest.raises(OverflowError):
        SCAN.keyless_fill(b"h", (), b"", prefix, -1)


@needs_scan
def test_what_the_sdk_sends_singly_is_scanned() -> None:
    """The SDK's single sends (plain, tagged, keyed, with user properties), as the broker decodes
    their frames, take the C scan."""
    from txmq.client._single import BinarySendHeaders

    mq = MessageQueue("ScanA", 0, "broker-a")
    sdk = RemotingConnection(serialize_type=SerializeType.ROCKETMQ)
    broker_side = RemotingConnection()
    headers_ = BinarySendHeaders()
    for message in (
        Message("ScanA", b"x" * 1024),
        Message("ScanA", b"y", tags="t", keys=("k1", "k2"), properties={"a": "1"}),
    ):
        ext, body, message_id = headers_.request(mq, message, "PG", 0)
        broker_side.receive_data(sdk.send_binary_request(RequestCode.SEND_MESSAGE_V2, ext, body)[1])
        request = broker_side.next_event()
        assert isinstance(request, RemotingCommand)
        scan = SCAN.one_scan(request.body, request.ext_fields["i"], b"PGROUP\x01PG\x02", *_LIMITS)
        assert scan is not None
        assert scan[4] == [message_id]


@needs_scan
def test_a_message_without_an_id_is_scanned_keyless() -> None:
    """What ``remoting_bench.py`` (and some 4.x clients) send, a message with a tag and no id, takes
    the scan in its keyless mode (only)."""
    text = props.encode({props.TAGS: "bench"}).decode()
    assert SCAN.one_scan(b"x", text, b"PGROUP\x01PG\x02", *_LIMITS) is None
    scan = SCAN.one_scan(b"x", text, b"PGROUP\x01PG\x02", *_LIMITS, True)
    assert scan is not None
    assert scan[1] == (b"TAGS\x01bench\x02UNIQ_KEY\x01",)
    assert scan[3] == ((),)
    assert scan[4] == []
