"""Wire <-> broker types: send headers and properties to ``Message``, ``MessageView`` to message records.

4.x clients carry every message field as a property (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``DELAY``,
``__SHARDINGKEY``, ``TRAN_MSG``); txmq's ``Message`` has them as fields, and the broker writes them back
as the same properties, so a record reads the same through either front door.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Final

from txmq.broker.records import split_host
from txmq.common import errors
from txmq.common import properties as props
from txmq.common.message import LeanMessage, Message, MessageView, SysFlag
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE
from txmq.protocol.remoting.errors import LocalProtocolError
from txmq.protocol.remoting.message_codec import (
    PullBodyWriter,
    WireMessage,
    body_crc,
    ipv4_bytes,
    packed_host,
)
from txmq.storage import codec
from txmq.storage.codec import RawRecord

_CONSUMED = frozenset(
    {
        props.TAGS,
        props.KEYS,
        props.UNIQ_KEY,
        props.DELAY,
        props.SHARDING_KEY,
        props.TRAN_MSG,
        props.TIMER_DELIVER_MS,
    }
)
# ali-ons spells the sharding key differently; its queue choice already follows the key.
_ALI_SHARDING_KEY = "__SHARDING_KEY"


def to_message(topic: str, body: bytes, properties: Mapping[str, str], sys_flag: int) -> Message:
    """A ``Message`` from a 4.x send: message fields out of the properties, the rest passed along."""
    delay = properties.get(props.DELAY, "")
    try:
        delay_level = int(delay) if delay else None
    except ValueError:
        raise errors.InvalidDeliveryTime(f"DELAY property {delay[:16]!r} is not a delay level") from None
    transactional = properties.get(props.TRAN_MSG, "").lower() == "true" or bool(
        sys_flag & TRANSACTION_PREPARED_TYPE
    )
    deliver = properties.get(props.TIMER_DELIVER_MS, "")
    if deliver and not deliver.isdecimal():
        raise errors.InvalidDeliveryTime(f"TIMER_DELIVER_MS {deliver[:20]!r} is not epoch milliseconds")
    delivery_ms = int(deliver) if deliver else None
    group = properties.get(props.SHARDING_KEY) or properties.get(_ALI_SHARDING_KEY) or None
    if group is not None and (transactional or delay_level or delivery_ms is not None):
        group = None  # 4.x allows an ordered-by-key delay or transaction; the key only picked the queue
    keys = properties.get(props.KEYS, "")
    # positional, in field order (topic, body, tags, keys, properties, message_group,
    # delivery_timestamp_ms, delay_level, message_id, transactional): the cheaper call, one per send
    return Message(
        topic,
        body,
        properties.get(props.TAGS) or None,
        tuple([k for k in keys.split(props.KEY_SEPARATOR) if k]) if keys else (),
        {k: v for k, v in properties.items() if k not in _CONSUMED and k != _ALI_SHARDING_KEY},
        group,
        delivery_ms if not delay_level else None,
        delay_level or None,
        properties.get(props.UNIQ_KEY) or None,
        transactional,
    )


_SYSTEM_KEYS = props.SYSTEM_KEYS
_new_tuple = tuple.__new__  # a NamedTuple built without its Python-level __new__ (an interpreted call)


def to_lean(body: bytes, properties: dict[str, str], sys_flag: int) -> LeanMessage | None:
    """The send lane's message for a NORMAL or FIFO 4.x send, or None when :func:`to_message` must
    judge it (a delay, a transaction, check immunity): the same fields ``to_message`` would give."""
    if sys_flag & TRANSACTION_PREPARED_TYPE:
        return None
    # the properties that send a 4.x message down the general path (delay, transaction, check
    # immunity, the ali-ons sharding key): one dict lookup each
    if (
        props.DELAY in properties
        or props.TRAN_MSG in properties
        or props.TIMER_DELIVER_MS in properties
        or props.CHECK_IMMUNITY_TIME_IN_SECONDS in properties
        or _ALI_SHARDING_KEY in properties
    ):
        return None
    keys = properties.get(props.KEYS, "")
    lean: LeanMessage = _new_tuple(
        LeanMessage,
        (
            body if type(body) is bytes else bytes(body),
            {k: v for k, v in properties.items() if k not in _SYSTEM_KEYS},
            properties.get(props.TAGS) or None,
            tuple([k for k in keys.split(props.KEY_SEPARATOR) if k]) if keys else (),
            properties.get(props.UNIQ_KEY) or None,
            properties.get(props.SHARDING_KEY) or None,
        ),
    )
    return lean


# the properties that send a message down the general path (to_lean declines them)
_GENERAL_KEYS = frozenset(
    {props.DELAY, props.TRAN_MSG, props.TIMER_DELIVER_MS, props.CHECK_IMMUNITY_TIME_IN_SECONDS}
)
_ENTRY_HEAD_SIZE = 20  # a batch entry's int32 TOTALSIZE, MAGIC, BODYCRC, FLAG, body length


def _u32(data: bytes, at: int) -> int:
    """The big-endian 32 bits at ``at``, unsigned (compiled: four byte reads, no struct call)."""
    return (data[at] << 24) | (data[at + 1] << 16) | (data[at + 2] << 8) | data[at + 3]


def lean_batch(data: bytes, sys_flag: int) -> list[LeanMessage] | None:
    """The send lane's messages of a SEND_BATCH_MESSAGE body, or None when the general decode must
    judge it: what ``[to_lean(b, p, sys_flag) for b, p, _ in decode_batch_entries(data)]`` gives
    when every entry is well-formed and plain (tests/property/test_lean_batch.py).

    Each entry's properties are read in one pass over their ``name\x01value\x02`` pairs, taking the
    fields the lane needs (tags, keys, message id, message group) and the user properties, with no
    dict of every property per entry. Anything unusual (a malformed entry or pair, bytes that are
    not UTF-8, a property that makes the message delayed or transactional, the ali-ons sharding
    key, an empty batch) returns None: the general decode then gives the message or the error."""
    if sys_flag & TRANSACTION_PREPARED_TYPE:
        return None
    size = len(data)
    if size == 0:
        return None
    lane: list[LeanMessage] = []
    system = _SYSTEM_KEYS
    general = _GENERAL_KEYS
    pos: int = 0
    total: int
    body_len: int
    body_start: int
    props_at: int
    end: int
    while pos < size:
        if size - pos < _ENTRY_HEAD_SIZE:
            return None
        # read unsigned: a negative (signed) size or length is one of 2**31 or more here, as far
        # out of bounds as the general decode finds the negative one
        total = _u32(data, pos)
        body_len = _u32(data, pos + 16)
        body_start = pos + _ENTRY_HEAD_SIZE
        props_at = body_start + body_len
        if props_at + 2 > size:
            return None
        end = props_at + 2 + ((data[props_at] << 8) | data[props_at + 1])
        if end > size or total != end - pos:
            return None
        tags = ""
        keys = ""
        message_id = ""
        group = ""
        user: dict[str, str] = {}
        if end > props_at + 2:
            try:
                text = data[props_at + 2 : end].decode("utf-8")
            except UnicodeDecodeError:
                return None
            for item in text.split("\x02"):
                if not item:
                    continue
                name, sep, value = item.partition("\x01")
                if not sep:
                    return None
                if name in system:
                    if name == props.TAGS:
                        tags = value
                    elif name == props.UNIQ_KEY:
                        message_id = value
                    elif name == props.KEYS:
                        keys = value
                    elif name == props.SHARDING_KEY:
                        group = value
                    elif name in general:
                        return None
                    # any other system property (WAIT, PGROUP, ...) is the lane's to set, or dropped
                elif name == _ALI_SHARDING_KEY:
                    return None
                else:
                    user[name] = value
        lean: LeanMessage = _new_tuple(
            LeanMessage,
            (
                data[body_start:props_at],
                user,
                tags or None,
                tuple([k for k in keys.split(props.KEY_SEPARATOR) if k]) if keys else (),
                message_id or None,
                group or None,
            ),
        )
        lane.append(lean)
        pos = end
    return lane


@functools.lru_cache(maxsize=1024)
def _host(host_port: str) -> tuple[str, int]:
    """``"ip:port"`` -> ``(ip, port)``; cached: a broker has one store host and few born hosts."""
    return split_host(host_port or "127.0.0.1:0")


def to_wire(view: MessageView, *, topic: str | None = None, sys_flag: int = 0) -> WireMessage:
    """The message record a 4.x consumer decodes (V1, IPv4 hosts); the stored property bytes are
    passed through when the view carries them."""
    raw = view.raw_properties
    return WireMessage(
        topic=topic or view.topic,
        body=view.body,
        properties=dict(view.properties) if raw is None else {},
        properties_raw=raw,
        queue_id=view.queue_id,
        queue_offset=view.queue_offset,
        commit_log_offset=view.commit_log_offset,
        sys_flag=sys_flag,
        born_timestamp=view.born_timestamp_ms,
        born_host=_host(view.born_host),
        store_timestamp=view.store_timestamp_ms,
        store_host=_host(view.store_host),
        reconsume_times=view.reconsume_times,
        body_crc=body_crc(view.body),
    )


def check_wire(view: MessageView, transaction_id: str, producer_group: str) -> WireMessage:
    """The half message of a CHECK_TRANSACTION_STATE: what 4.x producers need to find their producer."""
    properties = dict(view.properties)
    properties.setdefault(props.PRODUCER_GROUP, producer_group)
    properties[props.TRAN_MSG] = "true"
    properties[props.TRANSACTION_ID] = transaction_id
    if view.message_id:
        properties.setdefault(props.UNIQ_KEY, view.message_id)
    return dataclasses.replace(
        to_wire(view, sys_flag=SysFlag.TRANSACTION_PREPARED), properties=properties, properties_raw=None
    )


_NAMES_MAX = 4096
# a record's names part (topic, born host, store host as stored) -> (topic, born, store as the wire
# carries them), or None when a host is not UTF-8; a broker sees few distinct names parts
_wire_names: dict[bytes, tuple[bytes, tuple[bytes, int], tuple[bytes, int]] | None] = {}
_RECONSUME_KEY: Final = (props.RECONSUME_TIME + props.NAME_VALUE_SEPARATOR).encode()


def _names_for_wire(names: bytes) -> tuple[bytes, tuple[bytes, int], tuple[bytes, int]] | None:
    topic, born_host, store_host = codec.names_of(names)
    try:
        wire = (topic, _wire_host(born_host), _wire_host(store_host))
    except UnicodeDecodeError:
        wire = None
    if len(_wire_names) < _NAMES_MAX:
        _wire_names[names] = wire
    return wire


def _wire_host(raw: bytes) -> tuple[bytes, int]:
    """A stored ``ip:port`` host as a record's IPv4 bytes and port, as ``to_wire`` makes it. Raises
    UnicodeDecodeError on bytes that are not UTF-8 (which the general read rejects)."""
    host, port = _host(str(raw, "utf-8"))
    return ipv4_bytes(host), port


# names part -> (topic, born host, store host) packed for the wire (``packed_host``), None for the
# general path (hosts not UTF-8, or a port that does not fit, which the general encoder then reports)
_packed_names: dict[bytes, tuple[bytes, bytes, bytes] | None] = {}


def _names_packed(names: bytes) -> tuple[bytes, bytes, bytes] | None:
    wire = _wire_names[names] if names in _wire_names else _names_for_wire(names)
    packed = None
    if wire is not None:
        try:
            packed = (wire[0], packed_host(*wire[1]), packed_host(*wire[2]))
        except LocalProtocolError:
            packed = None
    if len(_packed_names) < _NAMES_MAX:
        _packed_names[names] = packed
    return packed


class PullSink(codec.RecordSink):
    """The fused pull path's sink (``Broker.pull_into``): each record the commit log hands over goes
    straight into the PULL_MESSAGE body (:class:`PullBodyWriter`) as ``to_wire(to_view(record))``
    encodes it (``tests/pull_oracle.py`` keeps the staged path it replaced); records the lean encoding
    does not cover byte for byte (a RECONSUME_TIME property, another stored topic, hosts not UTF-8),
    and those whose host port does not fit the wire's int32 (the general encoder reports it), are
    encoded by ``general(physical_offset)`` when :meth:`body` is called, after the read, in their
    place."""

    def __init__(self, topic: str, general: Callable[[int], bytes]) -> None:
        self.topic_bytes = topic.encode("utf-8")
        self.general = general
        self.writer = PullBodyWriter(topic)
        self.pending: list[tuple[int, int]] = []  # (place in the writer, physical offset)
        self.count = 0
        self.last_names = b""  # the last names part seen and its packed wire form (a one-entry cache)
        self.last_wire: tuple[bytes, bytes, bytes] | None = None

    def take(
        self, data: bytes, names_start: int, names_end: int, properties_end: int, body: memoryview,
        queue_id: int, queue_offset: int, physical_offset: int, born_ts: int, store_ts: int, reconsume: int,
    ) -> None:  # fmt: skip
        # the properties with their stored u16 length: the wire's length and properties as they are
        self._add(
            data[names_start:names_end], data[names_end:properties_end], body, queue_id, queue_offset,
            physical_offset, born_ts, store_ts, reconsume,
        )  # fmt: skip

    def take_fields(self, fields: RawRecord) -> None:
        (_, queue_id, _, queue_offset, physical_offset, _, born_ts, store_ts, _, reconsume, _, names,
         properties, body) = fields  # fmt: skip
        self._add(
            names, len(properties).to_bytes(2, "big") + properties, body, queue_id, queue_offset,
            physical_offset, born_ts, store_ts, reconsume,
        )  # fmt: skip

    def _add(
        self, names: bytes, length_and_properties: bytes, body: memoryview, queue_id: int, queue_offset: int,
        physical_offset: int, born_ts: int, store_ts: int, reconsume: int,
    ) -> None:  # fmt: skip
        self.count += 1
        if names == self.last_names:  # a pull's records mostly share their names part
            wire = self.last_wire
        else:
            wire = _packed_names[names] if names in _packed_names else _names_packed(names)
            self.last_names, self.last_wire = names, wire
        # find, not `in`: bytes.__contains__ first tries the needle as an int (a TypeError built and
        # dropped, ~2,000 instructions a record). The length bytes in front can only add a false match,
        # which the general path answers the same.
        if wire is None or wire[0] != self.topic_bytes or length_and_properties.find(_RECONSUME_KEY) >= 0:
            self.pending.append((self.writer.add_encoded(b""), physical_offset))
            return
        self.writer.add_packed(
            body, length_and_properties, queue_id, queue_offset, physical_offset, born_ts, wire[1], store_ts,
            wire[2], reconsume,
        )  # fmt: skip

    def clear(self) -> None:
        self.writer.clear()
        self.pending.clear()
        self.count = 0

    def body(self) -> bytes:
        """The response body of every record taken, in order."""
        for place, physical_offset in self.pending:
            self.writer.replace(place, self.general(physical_offset))
        return self.writer.getvalue()
