"""The lean pull path against the general one: for arbitrary stored records, the raw fields
(``codec.split``) equal the decoded record's, and the wire records ``encode_pulled`` writes from
them are byte for byte what ``encode_message(to_wire(to_view(record)))`` writes (or both fail alike)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from txmq.broker.records import to_view
from txmq.common import properties as props
from txmq.common.errors import CorruptRecord, TxmqError
from txmq.protocol.remoting.errors import LocalProtocolError
from txmq.protocol.remoting.message_codec import encode_message, encode_messages
from txmq.server.remoting.convert import PullSink, to_wire
from txmq.storage import codec
from txmq.storage.api import StoredRecord

from ..pull_oracle import encode_pulled, pulled

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12)
_KEYS = st.one_of(
    st.sampled_from([props.TAGS, props.KEYS, props.UNIQ_KEY, props.RECONSUME_TIME, props.RETRY_TOPIC]),
    st.text("abcXRECONSUME_TIMEy", min_size=1, max_size=16),
)
_RECONSUME_VALUES = st.one_of(st.integers(0, 2**40).map(str), _TEXT)
_HOSTS = st.one_of(
    st.sampled_from(["127.0.0.1:10911", "10.1.2.3:0", "::ffff:10.0.0.1:55", "[::1]:80", "", "h:x", ":"]),
    st.builds(
        lambda a, b, c, d, port: f"{a}.{b}.{c}.{d}:{port}",
        *[st.integers(0, 255)] * 4,
        st.integers(-(2**32), 2**32),
    ),
    st.text("0123456789.:ab", max_size=24),
)

# the broker's own address: always host:port (the general path's message id needs a port that fits)
_STORE_HOSTS = st.one_of(
    st.sampled_from(["127.0.0.1:10911", "10.1.2.3:0", "::ffff:10.0.0.1:55", "host:1"]),
    st.builds(
        lambda a, b, port: f"10.{a}.{b}.1:{port}",
        st.integers(0, 255),
        st.integers(0, 255),
        st.integers(0, 65535),
    ),
)


@st.composite
def _properties(draw: st.DrawFn) -> bytes:
    entries = draw(st.dictionaries(_KEYS, _TEXT, max_size=5))
    if props.RECONSUME_TIME in entries:
        entries[props.RECONSUME_TIME] = draw(_RECONSUME_VALUES)
    return props.encode(entries)


_TOPICS = st.one_of(st.text("abcXYZ09_-%|", min_size=1, max_size=40), st.just("T" * 200))
fields_st = st.builds(
    codec.RecordFields,
    topic=st.just(b""),  # set from the drawn topic
    queue_id=st.integers(0, 1023),
    body=st.binary(max_size=300),
    properties=_properties(),
    tags_code=I64,
    flag=I32,
    sys_flag=I32,
    born_timestamp_ms=I64,
    born_host=_HOSTS.map(str.encode),
    reconsume_times=I32,
    prepared_transaction_offset=I64,
)


def _general(record: StoredRecord, topic: str) -> bytes | type[Exception]:
    try:
        return encode_message(to_wire(to_view(record), topic=topic))
    except (TxmqError, ValueError) as exc:
        return type(exc)


def _lean(
    raw: list[codec.RawRecord], topic: str, records: dict[int, StoredRecord]
) -> bytes | type[Exception]:
    def general(physical_offset: int) -> bytes:
        return encode_message(to_wire(to_view(records[physical_offset]), topic=topic))

    try:
        return encode_pulled(topic, pulled(raw, topic, general))
    except (TxmqError, ValueError) as exc:
        return type(exc)


def _covered(record: StoredRecord) -> bool:
    """Records the lean path encodes itself (the rest it hands to the general path)."""
    return props.RECONSUME_TIME not in props.decode(record.properties)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    topic=_TOPICS,
    fields=st.lists(fields_st, min_size=1, max_size=4),
    store_host=_STORE_HOSTS,
    start=st.integers(0, 2**40),
    store_ms=I64,
)
def test_lean_pull_records_are_byte_identical(
    topic: str, fields: list[codec.RecordFields], store_host: str, start: int, store_ms: int
) -> None:
    buf = bytearray()
    records: dict[int, StoredRecord] = {}
    positions: list[int] = []
    for queue_offset, f in enumerate(fields):
        f = f._replace(topic=topic.encode())
        offset = start + len(buf)
        encoded = codec.encode(f, store_host=store_host.encode(), queue_offset=queue_offset,
                               physical_offset=offset, store_timestamp_ms=store_ms)  # fmt: skip
        positions.append(len(buf))
        records[offset] = codec.decode(encoded, offset=offset)
        buf += encoded
    data = bytes(buf)
    raw = [codec.split(data, pos) for pos in positions]
    for fields_of, (offset, record) in zip(raw, records.items(), strict=True):
        assert fields_of[:11] == (
            record.size, record.queue_id, record.flag, record.queue_offset, offset, record.sys_flag,
            record.born_timestamp_ms, record.store_timestamp_ms, record.tags_code, record.reconsume_times,
            record.prepared_transaction_offset,
        )  # fmt: skip
        expected = (record.topic.encode(), record.born_host.encode(), record.store_host.encode())
        assert (*codec.names_of(fields_of[11]), fields_of[12]) == (*expected, record.properties)
        assert bytes(fields_of[13]) == record.body
    expected = [_general(r, topic) for r in records.values()]
    lean = _lean(raw, topic, records)
    if all(isinstance(e, bytes) for e in expected):
        assert lean == b"".join(e for e in expected if isinstance(e, bytes))
        if all(_covered(r) for r in records.values()):
            assert lean == encode_pulled(topic, pulled(raw, topic, _no_general))
    else:  # the pull fails; with one bad record, with its error (with several, one of theirs)
        failures = [e for e in expected if not isinstance(e, bytes)]
        assert lean in failures
        if len(failures) == 1:
            assert lean == failures[0]


def _no_general(physical_offset: int) -> bytes:
    raise AssertionError(f"record at {physical_offset} should not need the general path")


def test_encode_pulled_matches_encode_messages_for_a_plain_record() -> None:
    f = codec.RecordFields(
        b"Topic", 3, b"body", props.encode({props.TAGS: "a"}), 97, 0, 0, 1, b"1.2.3.4:5", 0, 0
    )
    data = codec.encode(
        f, store_host=b"9.8.7.6:10911", queue_offset=7, physical_offset=0, store_timestamp_ms=2
    )
    record = codec.decode(data)
    lean = encode_pulled("Topic", pulled([codec.split(data, 0)], "Topic", _no_general))
    assert lean == encode_messages([to_wire(to_view(record), topic="Topic")])
    assert encode_pulled("Topic", []) == b""


def test_a_long_topic_fails_like_the_general_encoder() -> None:
    topic = "t" * 0x8000
    f = codec.RecordFields(topic.encode(), 0, b"x", b"", 0, 0, 0, 1, b"1.2.3.4:5", 0, 0)
    data = codec.encode(f, store_host=b"9.8.7.6:1", queue_offset=0, physical_offset=0, store_timestamp_ms=2)
    with pytest.raises(LocalProtocolError):
        encode_message(to_wire(to_view(codec.decode(data)), topic=topic))
    with pytest.raises(LocalProtocolError):
        encode_pulled(topic, pulled([codec.split(data, 0)], topic, _no_general))


def test_split_rejects_records_that_do_not_check_out() -> None:
    f = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 1, b"h", 0, 0)
    data = bytearray(
        codec.encode(f, store_host=b"s", queue_offset=0, physical_offset=0, store_timestamp_ms=2)
    )
    data[codec.HEADER_BYTES + 1] = 200  # the topic length now runs past the record
    with pytest.raises(CorruptRecord, match="does not check out"):
        codec.split(bytes(data), 0)
    f = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 1, b"h", 0, 0)
    good = codec.encode(f, store_host=b"s", queue_offset=0, physical_offset=64, store_timestamp_ms=2)
    view = memoryview(good)
    assert codec.split_checked(good, 0, view, 64, len(good)) == codec.split(good)
    assert codec.split_checked(good, 0, view, 65, len(good)) is None, "misdirected"
    assert codec.split_checked(good, 0, view, 64, len(good) - 1) is None, "not the unit's size"
    assert codec.split_checked(good[:-1], 0, memoryview(good[:-1]), 64, len(good)) is None, "cut short"


def test_split_checked_holds_a_record_to_its_unit() -> None:
    """With the unit's queue (``queue_id`` >= 0) the record must also be that topic's, at that queue id,
    queue offset and tags code: a ConsumeQueue unit damaged on disk names another sound record."""
    f = codec.RecordFields(b"Topic", 3, b"body", b"", 77, 0, 0, 1, b"h", 0, 0)
    good = codec.encode(f, store_host=b"s", queue_offset=9, physical_offset=64, store_timestamp_ms=2)
    view = memoryview(good)
    size = len(good)
    assert codec.split_checked(good, 0, view, 64, size, 3, 9, 77, b"Topic") == codec.split(good)
    for queue_id, queue_offset, tags, topic in [
        (2, 9, 77, b"Topic"), (3, 8, 77, b"Topic"), (3, 9, 76, b"Topic"), (3, 9, 77, b"Topix"),
        (3, 9, 77, b"Top"),
    ]:  # fmt: skip
        assert codec.split_checked(good, 0, view, 64, size, queue_id, queue_offset, tags, topic) is None


def _fused(
    data: bytes, units: list[tuple[int, int, int, int, int]], topic: str, records: dict[int, StoredRecord]
) -> bytes | type[Exception]:
    """The fused path's body for ``units`` (position, log offset, size, queue offset, tags code) of
    ``data``: each record checked and handed to the remoting pull's sink straight from the buffer."""

    def general(physical_offset: int) -> bytes:
        return encode_message(to_wire(to_view(records[physical_offset]), topic=topic))

    sink = PullSink(topic, general)
    view = memoryview(data)
    try:
        for pos, offset, size, queue_offset, tags_code in units:
            taken = codec.check_into(
                data, pos, view, offset, size, 0, queue_offset, tags_code, topic.encode(), sink
            )
            assert taken, f"the sound record at {offset} checks out"
        assert sink.count == len(units)
        return sink.body()
    except (TxmqError, ValueError) as exc:
        return type(exc)


def _stored_run(
    topic: str, fields: list[codec.RecordFields], store_host: str, start: int, store_ms: int
) -> tuple[bytes, list[tuple[int, int, int, int, int]], dict[int, StoredRecord]]:
    """``fields`` stored back to back from log offset ``start`` (queue 0 of ``topic``)."""
    buf = bytearray()
    records: dict[int, StoredRecord] = {}
    units: list[tuple[int, int, int, int, int]] = []
    for queue_offset, f in enumerate(fields):
        f = f._replace(topic=topic.encode(), queue_id=0)
        offset = start + len(buf)
        encoded = codec.encode(f, store_host=store_host.encode(), queue_offset=queue_offset,
                               physical_offset=offset, store_timestamp_ms=store_ms)  # fmt: skip
        units.append((len(buf), offset, len(encoded), queue_offset, f.tags_code))
        records[offset] = codec.decode(encoded, offset=offset)
        buf += encoded
    return bytes(buf), units, records


_HOST = b"127.0.0.1:10911"
# two bad records in one pull: the lean path meets the RECONSUME_TIME one first, the fused one the port
_TWO_BAD = [
    codec.RecordFields(b"", 0, b"", b"", 0, 0, 0, 0, _HOST, 0, 0, None),
    codec.RecordFields(b"", 0, b"", b"", 0, 0, 0, 0, b"2147483648", 0, 0, None),
    codec.RecordFields(
        b"", 0, b"", props.RECONSUME_TIME.encode() + b"\x01:\x02", 0, 0, 0, 0, _HOST, 0, 0, None
    ),
]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    topic=_TOPICS,
    fields=st.lists(fields_st, min_size=1, max_size=4),
    store_host=_STORE_HOSTS,
    start=st.integers(0, 2**40),
    store_ms=I64,
)
@example(topic="T" * 200, fields=_TWO_BAD, store_host="127.0.0.1:10911", start=0, store_ms=0)
def test_fused_pull_body_is_byte_identical_to_the_general_path(
    topic: str, fields: list[codec.RecordFields], store_host: str, start: int, store_ms: int
) -> None:
    """``codec.check_into`` + ``PullSink`` (the remoting pull's fused path, straight from the pread
    buffer) write what ``encode_message(to_wire(to_view(record)))`` writes for each record (properties,
    tags, keys, RECONSUME_TIME, sys flags, reconsume counts, IPv4 / IPv6 / odd hosts), or fail alike."""
    data, units, records = _stored_run(topic, fields, store_host, start, store_ms)
    expected = [_general(r, topic) for r in records.values()]
    fused = _fused(data, units, topic, records)
    raw = [codec.split(data, pos) for pos, *_ in units]
    lean = _lean(raw, topic, records)
    if all(isinstance(e, bytes) for e in expected):
        assert fused == lean == b"".join(e for e in expected if isinstance(e, bytes))
    else:  # both fail the pull; with two bad records each path may meet the other one first
        failures = [e for e in expected if not isinstance(e, bytes)]
        assert fused in failures and lean in failures, (fused, lean, failures)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    fields=fields_st,
    damage=st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
        st.tuples(
            st.just("unit"),
            st.sampled_from(["offset", "size", "queue", "at", "tags", "topic"]),
            st.sampled_from([-1, 1]),
        ),
    ),
)
def test_fused_check_refuses_exactly_what_split_checked_refuses(
    fields: codec.RecordFields, damage: tuple[str, object, int]
) -> None:
    """Every check of ``split_checked`` with a unit (magic, size, CRC32C over header and body, stored
    physical offset, inner lengths, the unit's queue id, queue offset, tags code and topic) holds in
    ``check_into``: a record with any byte flipped, or a unit naming another offset, size, queue,
    queue offset, tags code or topic, is refused by both, and nothing reaches the sink."""
    f = fields._replace(topic=b"Topic", queue_id=3)
    good = codec.encode(f, store_host=b"9.8.7.6:1", queue_offset=9, physical_offset=640, store_timestamp_ms=2)
    data = bytearray(b"\x00" * 5 + good)
    unit = {"offset": 640, "size": len(good), "queue": 3, "at": 9, "tags": f.tags_code, "topic": b"Topic"}
    kind, what, step = damage
    if kind == "flip":
        assert isinstance(what, int)
        data[5 + what % len(good)] ^= 1 << step
    elif what == "topic":
        unit["topic"] = b"Topix" if step > 0 else b"Topi"
    else:
        assert isinstance(what, str)
        value = unit[what]
        assert isinstance(value, int)
        unit[what] = value + step
    buf = bytes(data)
    args = (unit["offset"], unit["size"], unit["queue"], unit["at"], unit["tags"], unit["topic"])
    split = codec.split_checked(buf, 5, memoryview(buf), *args)  # type: ignore[arg-type]
    sink = PullSink("Topic", _no_general)
    taken = codec.check_into(buf, 5, memoryview(buf), *args, sink)  # type: ignore[arg-type]
    assert taken == (split is not None)
    assert sink.count == int(taken)
    assert not taken, "every damage is refused"


def test_fused_check_takes_a_sound_record_with_its_fields() -> None:
    f = codec.RecordFields(
        b"Topic", 3, b"body", props.encode({props.TAGS: "a"}), 77, 0, 0, 1, b"1.2.3.4:5", 2, 0
    )
    good = codec.encode(f, store_host=b"9.8.7.6:1", queue_offset=9, physical_offset=64, store_timestamp_ms=2)
    sink = PullSink("Topic", _no_general)
    assert codec.check_into(good, 0, memoryview(good), 64, len(good), 3, 9, 77, b"Topic", sink)
    assert sink.count == 1
    assert sink.body() == encode_pulled("Topic", pulled([codec.split(good)], "Topic", _no_general))
    sink.clear()
    assert (sink.count, sink.body()) == (0, b"")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    queue_id=st.integers(0, 2**31 - 1),
    queue_offset=st.integers(0, 2**62),
    physical_offset=st.integers(0, 2**62),
    tags=st.integers(-(2**63), 2**63 - 1),
    topic=st.binary(min_size=1, max_size=40),
    body=st.binary(max_size=64),
    bit=st.integers(0, 159),
)
def test_names_unit_agrees_with_split_checked_on_every_flipped_unit_bit(
    queue_id: int, queue_offset: int, physical_offset: int, tags: int, topic: bytes, body: bytes, bit: int
) -> None:
    """``codec.names_unit`` (the header-only unit check of records nobody reads whole) holds a record to
    its unit as ``split_checked`` does: true for its own unit, false for the unit with any one of its
    160 bits flipped (log offset, size, tags code), and for another queue id, queue offset or topic."""
    f = codec.RecordFields(topic, queue_id, body, b"", tags, 0, 0, 1, b"h", 0, 0)
    good = codec.encode(
        f, store_host=b"s", queue_offset=queue_offset, physical_offset=physical_offset, store_timestamp_ms=2
    )
    size = len(good)
    assert codec.names_unit(good, 0, physical_offset, size, queue_id, queue_offset, tags, topic)
    unit = bytearray(struct.pack(">qiq", physical_offset, size, tags))
    unit[bit // 8] ^= 0x80 >> (bit % 8)
    offset, flipped_size, flipped_tags = struct.unpack(">qiq", bytes(unit))
    assert not codec.names_unit(good, 0, offset, flipped_size, queue_id, queue_offset, flipped_tags, topic)
    for other_id, other_offset, other_topic in [
        (queue_id ^ 1, queue_offset, topic), (queue_id, queue_offset ^ 1, topic),
        (queue_id, queue_offset, topic + b"x"), (queue_id, queue_offset, bytes([topic[0] ^ 1]) + topic[1:]),
    ]:  # fmt: skip
        assert not codec.names_unit(good, 0, physical_offset, size, other_id, other_offset, tags, other_topic)
