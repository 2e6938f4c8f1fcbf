"""Hypothesis properties of the remoting codecs (h11's fuzz invariant and round trips).

* encode -> decode is the identity for JSON and ROCKETMQ headers, message records and batch bodies;
* a stream of frames cut at arbitrary points decodes to the same commands;
* arbitrary bytes (whole or fed one byte at a time) either decode or raise ``RemoteProtocolError``
  (frames) / ``InvalidBody`` (message bodies): never any other exception.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.protocol.remoting import frame
from txmq.protocol.remoting import message_codec as mc
from txmq.protocol.remoting.codes import LanguageCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand, make_response
from txmq.protocol.remoting.connection import (
    ConnectionClosed,
    ConnectionState,
    NeedData,
    RemotingConnection,
    Response,
)
from txmq.protocol.remoting.errors import InvalidBody, RemoteProtocolError

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
EXT = st.dictionaries(st.text(max_size=12), st.text(max_size=30), max_size=6)
LANG = st.sampled_from(list(LanguageCode))

json_commands = st.builds(
    RemotingCommand,
    code=INT32, opaque=INT32, flag=INT32, remark=st.none() | st.text(max_size=40), ext_fields=EXT,
    body=st.binary(max_size=200), language=LANG, version=INT32, serialize_type=st.just(SerializeType.JSON),
)  # fmt: skip
binary_commands = st.builds(
    RemotingCommand,
    code=INT16, opaque=INT32, flag=INT32, remark=st.none() | st.text(min_size=1, max_size=40),
    ext_fields=EXT, body=st.binary(max_size=200), language=LANG, version=INT16,
    serialize_type=st.just(SerializeType.ROCKETMQ),
)  # fmt: skip
commands = json_commands | binary_commands


@given(commands)
def test_command_round_trip(cmd: RemotingCommand) -> None:
    assert frame.decode(frame.encode(cmd)) == cmd


def _events(conn: RemotingConnection) -> list[object]:
    out: list[object] = []
    while not isinstance(event := conn.next_event(), NeedData | ConnectionClosed):
        out.append(event)
    return out


@given(st.lists(commands.filter(lambda c: not c.is_response), max_size=6), st.data())
def test_stream_cut_anywhere(cmds: list[RemotingCommand], data: st.DataObject) -> None:
    wire = b"".join(frame.encode(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    conn = RemotingConnection()
    got: list[object] = []
    last = 0
    for cut in [*cuts, len(wire)]:
        if cut > last:  # an empty chunk would mean EOF
            conn.receive_data(wire[last:cut])
        got += _events(conn)
        last = cut
    conn.receive_data(b"")
    got += _events(conn)
    assert got == cmds


def _feed_all(chunks: list[bytes]) -> None:
    """Feed chunks then EOF; only RemoteProtocolError may escape."""
    conn = RemotingConnection()
    try:
        for chunk in filter(None, chunks):
            conn.receive_data(chunk)
            _events(conn)
        conn.receive_data(b"")
        _events(conn)
    except RemoteProtocolError:
        assert conn.state is ConnectionState.ERROR


@given(st.binary(max_size=400))
def test_random_bytes_whole_and_byte_by_byte(data: bytes) -> None:
    _feed_all([data])
    _feed_all([data[i : i + 1] for i in range(len(data))])


@st.composite
def framed_garbage(draw: st.DrawFn) -> bytes:
    """Valid-looking prefixes around random headers, so the header parsers get fuzzed too."""
    serialize_type = draw(st.sampled_from([0, 1, 0, 1, 2, 255]))
    header = draw(st.binary(max_size=120) | st.builds(lambda v: json.dumps(v).encode(), _json_values))
    body = draw(st.binary(max_size=20))
    length = draw(st.just(4 + len(header) + len(body)) | st.integers(-5, 300))
    header_length = draw(st.just(len(header)) | st.integers(0, 0xFFFFFF))
    return struct.pack(">iI", length, (serialize_type << 24) | header_length) + header + body


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_headers = st.fixed_dictionaries(
    {},
    optional={
        "code": _json_values, "opaque": _json_values, "flag": _json_values, "version": _json_values,
        "language": _json_values, "remark": _json_values, "extFields": _json_values,
    },
)  # fmt: skip


@given(framed_garbage())
def test_framed_garbage_decodes_or_raises(data: bytes) -> None:
    _feed_all([data])
    _feed_all([data[i : i + 1] for i in range(len(data))])


@given(_headers, st.binary(max_size=10))
def test_random_json_headers_decode_or_raise(header: dict[str, object], body: bytes) -> None:
    raw = json.dumps(header).encode()
    data = struct.pack(">iI", 4 + len(raw) + len(body), len(raw)) + raw + body
    try:
        cmd = frame.decode(data)
    except RemoteProtocolError:
        return
    assert all(type(v) is str for v in cmd.ext_fields.values())
    assert cmd.body == body


# ---------------------------------------------------------------------------------------------- messages

_prop_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]))
_properties = st.dictionaries(_prop_text.filter(bool).map(lambda s: s[:10]), _prop_text.map(lambda s: s[:20]))
_hosts = st.tuples(st.ip_addresses(v=4).map(str), INT32)

wire_messages = st.builds(
    mc.WireMessage,
    topic=st.text(max_size=140), body=st.binary(max_size=100), properties=_properties, queue_id=INT32,
    queue_offset=INT64, commit_log_offset=INT64, sys_flag=INT32.map(lambda f: f & ~0x30),
    born_timestamp=INT64, born_host=_hosts, store_timestamp=INT64, store_host=_hosts, reconsume_times=INT32,
    prepared_transaction_offset=INT64, flag=INT32, body_crc=INT32,
)  # fmt: skip


@given(st.lists(wire_messages, max_size=4))
def test_message_records_round_trip(messages: list[mc.WireMessage]) -> None:
    data = mc.encode_messages(messages)
    decoded = mc.decode_messages(data)
    assert [(m.store_size, *_without_size(m)) for m in decoded] == [
        (len(mc.encode_message(m)), *_without_size(m)) for m in messages
    ]


def _without_size(m: mc.WireMessage) -> tuple[object, ...]:
    # dataclasses.fields, not __slots__: a mypyc-compiled dataclass has no __slots__ attribute
    return tuple(getattr(m, f.name) for f in dataclasses.fields(m) if f.name != "store_size")


@given(st.lists(st.builds(mc.BatchMessage, st.binary(max_size=50), _properties, INT32), max_size=5))
def test_batch_round_trip(entries: list[mc.BatchMessage]) -> None:
    assert mc.decode_batch(mc.encode_batch(entries)) == entries


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_message_bodies_decode_or_raise_invalid_body(data: bytes) -> None:
    for decode in (mc.decode_messages, mc.decode_batch):
        try:
            decode(data)
        except InvalidBody:
            pass


@given(st.lists(st.tuples(st.integers(0, 400), st.booleans()), max_size=12), st.randoms())
def test_pair_matches_responses_in_any_order(requests: list[tuple[int, bool]], rng: Random) -> None:
    """Requests (some oneway) from the client, answers from the broker in a random order."""
    client, broker = RemotingConnection(), RemotingConnection()
    for code, oneway in requests:
        broker.receive_data(client.send(client.new_request(code, oneway=oneway)))
    received = [c for c in _events(broker) if isinstance(c, RemotingCommand)]
    assert [(c.code, c.is_oneway) for c in received] == requests
    two_way = [c for c in received if not c.is_oneway]
    rng.shuffle(two_way)
    for request in two_way:
        client.receive_data(broker.send(make_response(request, 0)))
    answers = _events(client)
    assert [(a.command.opaque, a.request_code) for a in answers if isinstance(a, Response)] == [
        (r.opaque, r.code) for r in two_way
    ]
    assert len(answers) == len(two_way)
    assert client.pending == {}
