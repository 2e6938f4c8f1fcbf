"""RocketMQ's binary message layouts: pull/query/check-back records and SEND_BATCH_MESSAGE bodies.

Message record (``MessageDecoder.encode``; big-endian; records are concatenated in a body)::

     1 int32  TOTALSIZE (includes itself)         9 int64  BORNTIMESTAMP
     2 int32  MAGICCODE V1 0xDAA320A7 / V2 ..AB  10 4+4    BORNHOST ip, port (16+4 if sysFlag 0x10)
     3 int32  BODYCRC                            11 int64  STORETIMESTAMP
     4 int32  QUEUEID                            12 4+4    STOREHOST ip, port (16+4 if sysFlag 0x20)
     5 int32  FLAG                               13 int32  RECONSUMETIMES
     6 int64  QUEUEOFFSET                        14 int64  PREPARED TRANSACTION OFFSET
     7 int64  PHYSICALOFFSET (commit log)        15 int32 + bytes  BODY
     8 int32  SYSFLAG                            16 int8 (V1) / int16 (V2) + bytes  TOPIC
                                                 17 int16 + bytes  PROPERTIES (``k\\x01v\\x02``)

We always write V1 with IPv4 hosts, because ali-ons ignores the magic and the IPv6 flags; topics
longer than 127 bytes (which a V1 signed byte cannot hold) are written as V2. The decoder reads V1,
V2 and IPv6 hosts, as a Java broker may send them.

Batch body (``MessageDecoder.encodeMessages``), repeated::

    int32 TOTALSIZE, int32 MAGIC (0), int32 BODYCRC (0), int32 FLAG, int32 bodyLen + body,
    int16 propertiesLen + properties

Decoding problems raise ``InvalidBody``; encoding problems raise ``LocalProtocolError`` (or the
property errors of ``txmq.common.properties``).
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from dataclasses import dataclass, field
from typing import Final

from txmq.common import errors, msgid
from txmq.common import properties as props
from txmq.common.crc import crc32 as _crc32
from txmq.protocol.remoting.errors import InvalidBody, LocalProtocolError

MAGIC_V1: Final = -626843481  # 0xDAA320A7 as a Java int
MAGIC_V2: Final = -626843477  # 0xDAA320AB
BORNHOST_V6_FLAG: Final = 0x10
STOREHOST_V6_FLAG: Final = 0x20
_V6_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_TOPIC_V1_MAX: Final = 127
_PROPERTIES_MAX: Final = 0x7FFF  # a Java short

# fields 1-14 with IPv4 hosts, then the body length
_V4_FIXED: Final = struct.Struct(">iiiiiqqiq4siq4siiqi")
# the same with the constant fields as zero padding (flag, sys flag, prepared offset) and each host as its
# 8 packed bytes (:func:`packed_host`): what PullBodyWriter.add_packed packs, 12 arguments instead of 17
_V4_PACKED: Final = struct.Struct(">iiii4xqq4xq8sq8si8xi")
_V4_PACK: Final = _V4_PACKED.pack  # bound once: compiled, a direct call per record, no method lookup
_BODY_CRC32: Final = _crc32  # a static when compiled, not a module dict lookup per record
_HEAD = struct.Struct(">iiiiiqqiq")  # fields 1-9, common to every layout
_HOST4 = struct.Struct(">4si")
assert _V4_PACKED.size == _V4_FIXED.size
_HOST6 = struct.Struct(">16si")
_TAIL = struct.Struct(">iqi")  # 13, 14, body length
_STAMP = struct.Struct(">q")
_BATCH_HEAD = struct.Struct(">iiiii")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")

Host = tuple[str, int]


@dataclass(slots=True)
class WireMessage:
    """One stored message as the remoting protocol carries it (transport-neutral, no broker logic).

    ``properties_raw`` lets the broker pass the ``k\x01v\x02`` bytes its store already holds, which
    saves re-encoding every property on the pull path; the decoder fills ``properties`` only.
    Not frozen, because a frozen 17-field dataclass costs twice as much to build and consumers
    decode one per message: treat instances as values.
    """

    topic: str
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: Host = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    flag: int = 0
    body_crc: int = 0
    store_size: int = 0  # TOTALSIZE as decoded; ignored when encoding
    properties_raw: bytes | None = None  # when set, written verbatim instead of encoding ``properties``

    @property
    def offset_msg_id(self) -> str:
        """The 4.x offset message id: store IP, store port, commit-log offset (32 hex chars)."""
        return msgid.offset_message_id(self.store_host[0], self.store_host[1], self.commit_log_offset)


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One entry of a SEND_BATCH_MESSAGE body: only flag, body and properties travel."""

    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0


def body_crc(body: bytes) -> int:
    """RocketMQ's body CRC (``UtilAll.crc32``): CRC-32 masked to a non-negative Java int."""
    return _crc32(body) & 0x7FFFFFFF


@functools.lru_cache(maxsize=256)
def _ntoa(raw: bytes) -> str:
    return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"


@functools.lru_cache(maxsize=256)
def _ipv4(host: str) -> bytes:
    """Four address bytes (cached: a broker sees few hosts); not IPv4 -> 0.0.0.0, as ali-ons reads 4 bytes."""
    if host.startswith("::ffff:"):  # IPv4-mapped, as dual-stack sockets report peers
        host = host[7:]
    try:
        return ipaddress.IPv4Address(host).packed
    except ValueError:
        return b"\x00\x00\x00\x00"


def ipv4_bytes(host: str) -> bytes:
    """The four address bytes a record carries for ``host`` (0.0.0.0 when it is not IPv4)."""
    return _ipv4(host)


# ---------------------------------------------------------------------------------------------- records


def encode_message(msg: WireMessage) -> bytes:
    """One V1 record (V2 only when the topic needs a 2-byte length)."""
    topic = msg.topic.encode("utf-8")
    properties = props.encode(msg.properties) if msg.properties_raw is None else msg.properties_raw
    if len(properties) > _PROPERTIES_MAX:
        raise errors.PropertiesTooLarge("properties", len(properties), _PROPERTIES_MAX)
    if len(topic) <= _TOPIC_V1_MAX:
        magic, topic_len = MAGIC_V1, _U8.pack(len(topic))
    elif len(topic) <= 0x7FFF:
        magic, topic_len = MAGIC_V2, _U16.pack(len(topic))
    else:
        raise LocalProtocolError(f"topic of {len(topic)} bytes is too long for a message record")
    body = msg.body
    total = _V4_FIXED.size + len(body) + len(topic_len) + len(topic) + 2 + len(properties)
    try:
        fixed = _V4_FIXED.pack(
            total, magic, msg.body_crc, msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset,
            msg.sys_flag & ~_V6_FLAGS, msg.born_timestamp, _ipv4(msg.born_host[0]), msg.born_host[1],
            msg.store_timestamp, _ipv4(msg.store_host[0]), msg.store_host[1], msg.reconsume_times,
            msg.prepared_transaction_offset, len(body),
        )  # fmt: skip
    except struct.error as exc:
        raise LocalProtocolError(f"message field out of range: {exc}") from None
    return b"".join((fixed, body, topic_len, topic, _U16.pack(len(properties)), properties))


def packed_host(ip: bytes, port: int) -> bytes:
    """A record's IPv4 host field: the 4 address bytes and the port (an int32); LocalProtocolError if
    the port does not fit, as :func:`encode_message` raises."""
    try:
        return _HOST4.pack(ip, port)
    except struct.error as exc:
        raise LocalProtocolError(f"message field out of range: {exc}") from None


class PullBodyWriter:
    """A PULL_MESSAGE response body built record by record (:meth:`add` from fields, and the
    broker's fused pull path, which adds each record straight from the commit log's pread buffer):
    the parts of every record are kept and joined once by :meth:`getvalue`."""

    def __init__(self, topic: str) -> None:
        topic_bytes = topic.encode("utf-8")
        self.topic_error: LocalProtocolError | None = None  # raised where encode_message raises it
        if len(topic_bytes) <= _TOPIC_V1_MAX:
            self.magic, self.topic_part = MAGIC_V1, _U8.pack(len(topic_bytes)) + topic_bytes
        elif len(topic_bytes) <= 0x7FFF:
            self.magic, self.topic_part = MAGIC_V2, _U16.pack(len(topic_bytes)) + topic_bytes
        else:
            self.magic, self.topic_part = MAGIC_V2, b""
            self.topic_error = LocalProtocolError(
                f"topic of {len(topic_bytes)} bytes is too long for a message record"
            )
        self.fixed_size = _V4_FIXED.size + len(self.topic_part) + 2
        self.parts: list[bytes | memoryview] = []

    def add(
        self, body: bytes | memoryview, properties: bytes, queue_id: int, queue_offset: int,
        commit_log_offset: int, born_ts: int, born_ip: bytes, born_port: int, store_ts: int, store_ip: bytes,
        store_port: int, reconsume: int,
    ) -> None:  # fmt: skip
        """One record (``sys_flag``, ``flag`` and the prepared offset 0; the body CRC computed);
        ``body`` is kept, not copied, until :meth:`getvalue`."""
        if len(properties) > _PROPERTIES_MAX:  # checked first, as encode_message does
            raise errors.PropertiesTooLarge("properties", len(properties), _PROPERTIES_MAX)
        if self.topic_error is not None:
            raise self.topic_error
        self.add_packed(
            body, len(properties).to_bytes(2, "big") + properties, queue_id, queue_offset, commit_log_offset,
            born_ts, packed_host(born_ip, born_port), store_ts, packed_host(store_ip, store_port), reconsume,
        )  # fmt: skip

    def add_packed(
        self, body: bytes | memoryview, length_and_properties: bytes, queue_id: int, queue_offset: int,
        commit_log_offset: int, born_ts: int, born_host: bytes, store_ts: int, store_host: bytes,
        reconsume: int,
    ) -> None:  # fmt: skip
        """:meth:`add` with the properties after their big-endian u16 length, as the record's wire form
        ends (and a CommitLog record holds them: one slice of a stored record, no length encoded), and
        the hosts packed (:func:`packed_host`, cached by the caller)."""
        properties_len = len(length_and_properties) - 2
        if properties_len > _PROPERTIES_MAX:  # checked first, as encode_message does
            raise errors.PropertiesTooLarge("properties", properties_len, _PROPERTIES_MAX)
        if self.topic_error is not None:
            raise self.topic_error
        body_len = len(body)
        try:
            fixed = _V4_PACK(
                self.fixed_size + body_len + properties_len, self.magic, _BODY_CRC32(body) & 0x7FFFFFFF,
                queue_id, queue_offset, commit_log_offset, born_ts, born_host, store_ts, store_host,
                reconsume, body_len,
            )  # fmt: skip
        except struct.error as exc:
            raise LocalProtocolError(f"message field out of range: {exc}") from None
        self.parts += (fixed, body, self.topic_part, length_and_properties)

    def add_encoded(self, record: bytes) -> int:
        """A record encoded already, copied as it is; returns its place for :meth:`replace`."""
        self.parts.append(record)
        return len(self.parts) - 1

    def replace(self, place: int, record: bytes) -> None:
        """Put ``record`` (encoded) where :meth:`add_encoded` put a placeholder."""
        self.parts[place] = record

    def clear(self) -> None:
        self.parts.clear()

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def encode_messages(messages: list[WireMessage]) -> bytes:
    """A PULL_MESSAGE / QUERY_MESSAGE response body: records back to back."""
    return b"".join([encode_message(m) for m in messages])


def decode_messages(data: bytes) -> list[WireMessage]:
    """Every record in a body; raises ``InvalidBody`` if any is truncated or malformed."""
    result: list[WireMessage] = []
    pos = 0
    while pos < len(data):
        msg, pos = decode_message(data, pos)
        result.append(msg)
    return result


# One record of a pull body as :func:`decode_pulled` returns it: topic, body, properties (the raw
# ``k\x01v\x02`` bytes), queue_id, queue_offset, commit_log_offset, born_timestamp, born host
# ``(ip, port)``, store_timestamp, store host ``(ip, port)``, reconsume_times, TOTALSIZE.
PulledFields = tuple[str, bytes, bytes, int, int, int, int, Host, int, Host, int, int]


def decode_pulled(data: bytes) -> list[PulledFields]:
    """The records of a pull body as plain tuples (no ``WireMessage``, properties left encoded): the
    consumer's lean decode. IPv4 V1/V2 records only; on anything else (IPv6 hosts, a malformed
    record) it raises ``InvalidBody`` and callers use :func:`decode_messages`, whose checks and errors
    are the reference."""
    result: list[PulledFields] = []
    unpack, v4_size, size = _V4_FIXED.unpack_from, _V4_FIXED.size, len(data)
    hosts: dict[tuple[bytes, int], Host] = {}
    topics: dict[bytes, str] = {}
    pos = 0
    try:
        while pos < size:
            (total, magic, _, queue_id, _, queue_offset, phys, sys_flag, born_ts, born_ip, born_port,
             store_ts, store_ip, store_port, reconsume, _, body_len) = unpack(data, pos)  # fmt: skip
            end = pos + total
            if sys_flag & _V6_FLAGS or total < v4_size or end > size or body_len < 0:
                raise ValueError("not a plain IPv4 record")
            p = pos + v4_size + body_len
            if p > end:
                raise ValueError(f"body length {body_len} is out of bounds")
            body = data[pos + v4_size : p]
            if magic == MAGIC_V1:
                topic_end = p + 1 + data[p]
                raw_topic = data[p + 1 : topic_end]
            elif magic == MAGIC_V2:
                topic_end = p + 2 + ((data[p] << 8) | data[p + 1])
                raw_topic = data[p + 2 : topic_end]
            else:
                raise ValueError(f"unknown magic code {magic:#x}")
            if topic_end + 2 > end:
                raise ValueError("topic runs past the record")
            props_start = topic_end + 2
            props_end = props_start + ((data[topic_end] << 8) | data[topic_end + 1])
            if props_end > end:
                raise ValueError("properties run past the record")
            topic = topics.get(raw_topic)
            if topic is None:
                topic = topics[raw_topic] = raw_topic.decode("utf-8")
            born = hosts.get((born_ip, born_port))
            if born is None:
                born = hosts[(born_ip, born_port)] = (_ntoa(born_ip), born_port)
            store = hosts.get((store_ip, store_port))
            if store is None:
                store = hosts[(store_ip, store_port)] = (_ntoa(store_ip), store_port)
            raw_properties = data[props_start:props_end]
            result.append((topic, body, raw_properties, queue_id, queue_offset, phys, born_ts, born, store_ts,
                           store, reconsume, total))  # fmt: skip
            pos = end
    except (struct.error, IndexError, ValueError) as exc:
        raise InvalidBody(f"malformed message record at byte {pos}: {exc}") from None
    return result


def decode_message(data: bytes, pos: int = 0) -> tuple[WireMessage, int]:
    """The record at ``pos`` and the position after it."""
    try:
        return _decode_message(data, pos)
    except (struct.error, IndexError, errors.InvalidProperty, ValueError) as exc:
        raise InvalidBody(f"malformed message record at byte {pos}: {exc}") from None


def _decode_message(data: bytes, pos: int) -> tuple[WireMessage, int]:
    start = pos
    (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_ip, born_port, store_ts,
     store_ip, store_port, reconsume, prepared, body_len) = _V4_FIXED.unpack_from(data, pos)  # fmt: skip
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise ValueError(f"unknown magic code {magic:#x}")
    if total < _V4_FIXED.size or start + total > len(data):
        raise ValueError(f"total size {total} is out of bounds")
    if sys_flag & _V6_FLAGS:  # rare: re-read fields 10-15 with 16-byte addresses
        born_host, pos = _host(data, pos + _HEAD.size, sys_flag & BORNHOST_V6_FLAG)
        (store_ts,) = _STAMP.unpack_from(data, pos)
        store_host, pos = _host(data, pos + 8, sys_flag & STOREHOST_V6_FLAG)
        reconsume, prepared, body_len = _TAIL.unpack_from(data, pos)
        pos += _TAIL.size
    else:
        born_host = (_ntoa(born_ip), born_port)
        store_host = (_ntoa(store_ip), store_port)
        pos += _V4_FIXED.size
    end = start + total
    if body_len < 0 or pos + body_len > end:
        raise ValueError(f"body length {body_len} is out of bounds")
    body = data[pos : pos + body_len]
    pos += body_len
    if magic == MAGIC_V1:
        topic_len = data[pos]
        pos += 1
    else:
        (topic_len,) = _U16.unpack_from(data, pos)
        pos += 2
    if pos + topic_len + 2 > end:
        raise ValueError("topic runs past the record")
    topic = data[pos : pos + topic_len].decode("utf-8")
    pos += topic_len
    props_len = (data[pos] << 8) | data[pos + 1]
    pos += 2
    if pos + props_len > end:
        raise ValueError("properties run past the record")
    properties = props.decode(data[pos : pos + props_len]) if props_len else {}
    msg = WireMessage(
        topic, body, properties, queue_id, queue_offset, phys, sys_flag, born_ts, born_host, store_ts,
        store_host, reconsume, prepared, flag, crc, total,
    )  # fmt: skip
    return msg, end


def _host(data: bytes, pos: int, v6: int) -> tuple[Host, int]:
    if v6:
        raw, port = _HOST6.unpack_from(data, pos)
        return (str(ipaddress.IPv6Address(raw)), port), pos + _HOST6.size
    raw, port = _HOST4.unpack_from(data, pos)
    return (_ntoa(raw), port), pos + _HOST4.size


# ---------------------------------------------------------------------------------------------- batches


def encode_batch(messages: list[BatchMessage]) -> bytes:
    """A SEND_BATCH_MESSAGE body (what ``MessageDecoder.encodeMessages`` produces)."""
    parts: list[bytes] = []
    for msg in messages:
        properties = props.encode(msg.properties)
        if len(properties) > _PROPERTIES_MAX:
            raise errors.PropertiesTooLarge("properties", len(properties), _PROPERTIES_MAX)
        total = _BATCH_HEAD.size + len(msg.body) + 2 + len(properties)
        try:
            head = _BATCH_HEAD.pack(total, 0, 0, msg.flag, len(msg.body))
        except struct.error as exc:
            raise LocalProtocolError(f"batch entry field out of range: {exc}") from None
        parts += (head, msg.body, _U16.pack(len(properties)), properties)
    return b"".join(parts)


def encode_batch_encoded(entries: list[tuple[bytes, bytes]]) -> bytes:
    """:func:`encode_batch` of ``(body, properties)`` entries whose properties are encoded already
    (``props.encode``'s bytes) and whose flag is 0: the same body, the same errors."""
    parts: list[bytes] = []
    pack = _BATCH_HEAD.pack
    for body, properties in entries:
        if len(properties) > _PROPERTIES_MAX:
            raise errors.PropertiesTooLarge("properties", len(properties), _PROPERTIES_MAX)
        try:
            head = pack(_BATCH_HEAD.size + len(body) + 2 + len(properties), 0, 0, 0, len(body))
        except struct.error as exc:
            raise LocalProtocolError(f"batch entry field out of range: {exc}") from None
        parts += (head, body, len(properties).to_bytes(2, "big"), properties)
    return b"".join(parts)


def decode_batch(data: bytes) -> list[BatchMessage]:
    """The entries of a batch body; raises ``InvalidBody`` unless every entry is exactly well-formed."""
    return [BatchMessage(body, properties, flag) for body, properties, flag in decode_batch_entries(data)]


def decode_batch_entries(data: bytes) -> list[tuple[bytes, dict[str, str], int]]:
    """:func:`decode_batch` as ``(body, properties, flag)`` tuples (the broker's send lane: no
    ``BatchMessage`` per entry); the same checks and errors."""
    result: list[tuple[bytes, dict[str, str], int]] = []
    pos = 0
    size = len(data)
    head = _BATCH_HEAD.size
    # typed locals: compiled, the offsets below are machine-int arithmetic, not generic number calls
    total: int
    flag: int
    body_len: int
    props_len: int
    try:
        while pos < size:
            total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
            body_start = pos + head
            if body_len < 0 or body_start + body_len + 2 > size:
                raise ValueError(f"body length {body_len} is out of bounds")
            (props_len,) = _U16.unpack_from(data, body_start + body_len)
            props_start = body_start + body_len + 2
            end = props_start + props_len
            if end > size or total != end - pos:
                raise ValueError(f"total size {total} does not match the entry ({end - pos} bytes)")
            properties = props.decode(data[props_start:end]) if props_len else {}
            result.append((data[body_start : body_start + body_len], properties, flag))
            pos = end
    except (struct.error, errors.InvalidProperty, ValueError) as exc:
        raise InvalidBody(f"malformed batch entry at byte {pos}: {exc}") from None
    return result
