"""The send path: validate, pick a queue, route by message type, append, answer.

NORMAL and FIFO messages go to their topic; DELAY messages to the schedule topic (4.x delay levels) or
the timer topic (delivery timestamps); TRANSACTION messages to the half topic, invisible until a
decision. A batch (several messages in one request) is appended atomically and must be NORMAL or FIFO
of one topic.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
import zlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Final, NamedTuple

from txmq.broker import delay_levels as levels_mod
from txmq.broker.filtering import tag_hash
from txmq.broker.records import keys_of, split_host
from txmq.broker.reput import real_destination, to_real_topic
from txmq.broker.topics import TopicConfig, TopicRegistry
from txmq.common import errors, limits, msgid, names
from txmq.common import properties as props
from txmq.common.clock import Clock, now_ms_of
from txmq.common.fastinit import tuple_maker
from txmq.common.message import (
    LeanMessage,
    Message,
    MessageQueue,
    MessageType,
    SendResult,
    SysFlag,
    check_content,
)
from txmq.storage.api import AppendResult, PutRequest, RecordFields, StoredRecord
from txmq.storage.codec import BATCHENC
from txmq.storage.commitlog import BatchAppend
from txmq.storage.store import MessageStore

TIMER_BUCKET_MS = 60_000


def timer_queues(delay_ms_max: int) -> int:
    """Queues of the timer topic: one per minute of the delay window, plus slack for the wrap."""
    return delay_ms_max // TIMER_BUCKET_MS + 3


def timer_queue_of(deliver_ms: int, queues: int) -> int:
    return (deliver_ms // TIMER_BUCKET_MS) % queues


def fifo_queue_of(message_group: str, queues: int) -> int:
    return zlib.crc32(message_group.encode("utf-8")) % queues


@dataclass(frozen=True, slots=True)
class SendContext:
    producer_group: str | None = None
    born_host: str = ""
    queue_id: int | None = None


_LANE_TOPICS_MAX = 100_000
_HEX16 = "{:016X}".format


def hex16(offset: int) -> str:
    """``_HEX16(offset)`` of a log offset (0 <= offset < 2**64): three C calls, where the format
    method costs ~1.7k instructions more (compiled); one per single send's answer."""
    return offset.to_bytes(8, "big").hex().upper()


def _hex16s(offsets: Sequence[int]) -> list[str]:
    """``_HEX16`` of every (non-negative) log offset: one pack and one ``hex()``, then slices."""
    count = len(offsets)
    text = struct.pack(f">{count}Q", *offsets).hex().upper()
    return [text[i : i + 16] for i in range(0, 16 * count, 16)]


def offset_ids(prefix: str, offsets: Sequence[int]) -> list[str]:
    """The offset message ids of a batch's records (``prefix``: :meth:`SendService._offset_id_prefix`):
    one C call with the store's C extension (a string made per id, no slices or concatenations),
    else ``prefix`` + :func:`_hex16s`."""
    if BATCHENC is not None:
        ids: list[str] = BATCHENC.offset_ids(prefix, offsets)
        return ids
    return list(map(prefix.__add__, _hex16s(offsets)))


# the properties the lane sets after the user's (a user property of one of these names is unusual: a
# batch holding one goes message by message, where the dict keeps the first position)
_LANE_SET_KEYS = frozenset(
    {props.TAGS, props.KEYS, props.UNIQ_KEY, props.SHARDING_KEY, props.PRODUCER_GROUP, props.MESSAGE_TYPE}
)


# a batch's columns read straight from a request (SendService.lane_columns): bodies, each record's
# properties as the lane lays them out, tags codes, index keys, message ids, and the bodies' total
LaneScan = tuple[
    tuple[bytes, ...], tuple[bytes, ...], tuple[int, ...], tuple[tuple[str, ...], ...], list[str], int
]

# _lanescan.keyless_fill: (head, index keys, tail, id prefix, sequence) -> (properties, index keys, id)
KeylessFill = Callable[[bytes, tuple[str, ...], bytes, str, int], tuple[bytes, tuple[str, ...], str]]


class LaneSent(NamedTuple):
    """Where a batch of the send lane went, as columns (no :class:`SendResult` per message)."""

    topic: str
    queue_ids: Sequence[int]
    message_ids: Sequence[str]
    queue_offsets: Sequence[int]
    offset_ids: Sequence[str]  # offset message ids


def _sizes(items: Sequence[bytes]) -> tuple[int, int, int]:
    """(sum, min, max) of the items' lengths in one loop (compiled: a few dozen instructions an item,
    where ``sum``/``min``/``max`` over ``map(len, ...)`` cost ~300 each); ``items`` is not empty."""
    total = 0
    shortest = longest = len(items[0])
    for item in items:
        size = len(item)
        total += size
        if size < shortest:
            shortest = size
        elif size > longest:
            longest = size
    return total, shortest, longest


def _lane_keys_part(keys: Sequence[str]) -> str:
    return f"{props.KEYS}\x01{props.KEY_SEPARATOR.join(keys)}\x02"


def _lane_tail(producer_group: str | None, group: str | None) -> str:
    """The properties the lane sets after the message id: sharding key, producer group, message type."""
    sharding = "" if group is None else f"{props.SHARDING_KEY}\x01{group}\x02"
    producer = f"{props.PRODUCER_GROUP}\x01{producer_group}\x02" if producer_group else ""
    return f"{sharding}{producer}{props.MESSAGE_TYPE}\x01{'NORMAL' if group is None else 'FIFO'}\x02"


class LaneAppend(NamedTuple):
    """What :meth:`SendService.lane_append` appended; acknowledge it once ``durable`` completes."""

    topic: str
    records: list[RecordFields]
    appended: BatchAppend  # as columns: no AppendResult per record (the doors read one or two fields)
    message_ids: list[str]
    durable: Awaitable[None]


_HALF_TOPIC_BYTES: Final = names.HALF_TOPIC.encode()
_PREPARED: Final = int(SysFlag.TRANSACTION_PREPARED)


# a half's lane: the client properties it leaves to the general path (a delay, a delivery time, check
# immunity: to_message judges them), and those it does not copy to the record (the system ones, which
# it sets itself, and the ali-ons sharding key, which a transactional message drops)
_HALF_DECLINED: Final = (props.DELAY, props.TIMER_DELIVER_MS, props.CHECK_IMMUNITY_TIME_IN_SECONDS)
_HALF_DROPPED: Final = props.SYSTEM_KEYS | {"__SHARDING_KEY"}
_TRANSACTION_TYPE: Final = MessageType.TRANSACTION.name
_HALF_TYPE_PAIR: Final = f"{props.MESSAGE_TYPE}\x01{_TRANSACTION_TYPE}\x02"
_HALF_FLAG_PAIR: Final = f"{props.TRAN_MSG}\x01true\x02"
# the bytes of a lane half's routing tail (REAL_TOPIC, REAL_QUEUE_ID, TRAN_MSG pairs) besides the topic
# name and queue id: where the tail starts in the half's properties (HalfAppend.cut)
_HALF_TAIL_FIXED: Final = len(f"{props.REAL_TOPIC}\x01\x02{props.REAL_QUEUE_ID}\x01\x02{_HALF_FLAG_PAIR}")


class HalfAppend(NamedTuple):
    """What :meth:`SendService.half_append` appended; answer it once ``durable`` completes."""

    topic: TopicConfig
    fields: RecordFields  # the half's record, in RMQ_SYS_TRANS_HALF_TOPIC
    properties: dict[str, str]
    appended: AppendResult
    durable: Awaitable[None]
    # where the routing pairs that end the record's properties start (the length of the properties
    # before them), when the half's properties are those pairs after the others; -1 when unknown
    cut: int


class SendService:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicRegistry,
        clock: Clock,
        *,
        delay_levels: tuple[int, ...],
        delay_ms_max: int,
        broker_name: str,
    ) -> None:
        self._store = store
        self._topics = topics
        self._topic_configs = topics.configs()  # the registry's live map: get() without its call
        self._clock = clock
        self._levels = delay_levels
        self._delay_ms_max = delay_ms_max
        self._broker_name = broker_name
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._timer_queues = timer_queues(delay_ms_max)
        self._address: tuple[str, tuple[str, int]] | None = None
        self._id_prefix: tuple[str, str] | None = None  # (store host, its offset ids' first half)
        # the send lane's memory: client topic names that passed validate_topic, topic configs that
        # passed resolve (per message type), and one MessageQueue value per queue for the results
        self._lane_topics: set[str] = set()
        self._lane_resolved: dict[tuple[str, MessageType], TopicConfig] = {}
        # _lane_place's memory: a name that passed both for a NORMAL message -> (config, name's bytes)
        self._lane_normal: dict[str, tuple[TopicConfig, bytes]] = {}
        self._lane_queues: dict[tuple[str, int], MessageQueue] = {}
        self._lane_tails: dict[str | None, bytes | None] = {}  # producer group -> lane_tail
        # told of every half message stored (record, its properties, where it landed): the transaction
        # service keeps it for the END_TRANSACTION that follows, so the decision needs no log read
        # (it answers the half's transaction id, which is also its offset message id)
        # (and the properties' cut, HalfAppend.cut)
        self.half_stored: Callable[[RecordFields, dict[str, str], AppendResult, int], str] | None = None

    @property
    def timer_queue_count(self) -> int:
        return self._timer_queues

    async def send(self, messages: Sequence[Message], ctx: SendContext) -> list[SendResult]:
        if not messages:
            raise errors.InvalidArgument("a send request must carry at least one message")
        if len(messages) > 1:
            return await self._send_batch(messages, ctx)
        message = messages[0]
        if message.transactional:
            half = self.half_append(message, ctx, False)
            await half.durable
            if self.half_stored is not None:
                self.half_stored(half.fields, half.properties, half.appended, half.cut)
            return [self._result(message, names.HALF_TOPIC, 0, half.topic, half.appended, half.properties)]
        topic, request, properties = self._prepare(message, ctx)
        appended = await self._store.put(request)
        return [self._result(message, request.topic, request.queue_id, topic, appended, properties)]

    def half_append(self, message: Message, ctx: SendContext, shared: bool = True) -> HalfAppend:
        """The synchronous first half of :meth:`send` for one transactional message (the remoting
        door answers it from a callback on ``durable``, no task): checks and the append; once
        ``durable`` completed, :meth:`half_answer_fields` gives what its response carries.
        ``shared`` (the remoting door): the caller only adds done callbacks to ``durable``, never
        awaits it (it may be the group's one future); :meth:`send` awaits it (``shared=False``).

        The record is built as the store's fields (no :class:`PutRequest`): the record
        ``_prepare`` + ``_half`` would give (tests/unit/test_half_fields.py)."""
        if not message.transactional:
            raise errors.InvalidArgument("half_append takes a transactional message")
        topic, queue_id, now, properties, body, deliver_ms = self._prepare_head(message, ctx, None)
        # Transaction + delay: the delay is kept on the half message and starts at the commit.
        if message.delivery_timestamp_ms is not None and deliver_ms is not None:
            properties[props.TIMER_DELIVER_MS] = str(deliver_ms)
        self._half_properties(topic.name, queue_id, properties, ctx)
        fields: RecordFields = _MAKE_RECORD_FIELDS(
            _HALF_TOPIC_BYTES, 0, body, props.encode(properties), now, 0, _PREPARED, now,
            ctx.born_host.encode(), 0, 0, keys_of(properties),
        )  # fmt: skip
        appended, durable = self._store.put_record_nowait(names.HALF_TOPIC, fields, shared)
        half: HalfAppend = _MAKE_HALF_APPEND(topic, fields, properties, appended, durable, -1)
        return half

    def half_lane_append(
        self, topic_name: str, body: bytes, properties: dict[str, str], ctx: SendContext
    ) -> HalfAppend | None:
        """``half_append(to_message(topic_name, body, properties, sys_flag), ctx)`` for a 4.x half
        (``sys_flag`` with TRANSACTION_PREPARED) straight from its decoded properties, without a
        :class:`Message`: the same checks in the same order, the same queue choice, record and
        errors (tests/property/test_half_lane.py). None, having done nothing, for a half that asks
        for a delay, a delivery time or check immunity, names no message id, or whose body is not
        ``bytes``: the caller then takes the general path."""
        for key in _HALF_DECLINED:
            if key in properties:
                return None
        message_id = properties.get(props.UNIQ_KEY)
        if not message_id or type(body) is not bytes:
            return None
        tags = properties.get(props.TAGS) or None
        keys_text = properties.get(props.KEYS, "")
        keys = [k for k in keys_text.split(props.KEY_SEPARATOR) if k] if keys_text else []
        # Message.validate (a half has no message group, delay or delivery time), then resolve
        self._lane_check_name(topic_name)
        check_content(len(body), tags, keys, None)
        topic = self._lane_resolve(topic_name, MessageType.TRANSACTION)
        queue_id = self._queue_for(None, topic, ctx.queue_id)
        now = now_ms_of(self._clock)
        # _properties, then _half_properties: the user's properties in their order, then the system ones
        # (none of which is a user's: the user's are the non-system ones)
        record = {k: v for k, v in properties.items() if k not in _HALF_DROPPED}
        user = "".join([f"{k}\x01{v}\x02" for k, v in record.items()]) if record else ""
        if tags is not None:
            record[props.TAGS] = tags
        joined = ""
        if keys:
            joined = record[props.KEYS] = props.KEY_SEPARATOR.join(keys)
        record[props.UNIQ_KEY] = message_id
        group = ctx.producer_group
        if group:
            record[props.PRODUCER_GROUP] = group
        record[props.MESSAGE_TYPE] = _TRANSACTION_TYPE
        name = topic.name
        queue = str(queue_id)
        record[props.REAL_TOPIC] = name
        record[props.REAL_QUEUE_ID] = queue
        record[props.TRAN_MSG] = "true"
        if not group:
            record[props.PRODUCER_GROUP] = name
        # props.encode(record), its fast path written out: the pairs in the record's order, in one text
        tags_pair = "" if tags is None else f"{props.TAGS}\x01{tags}\x02"
        keys_pair = f"{props.KEYS}\x01{joined}\x02" if keys else ""
        group_pair = f"{props.PRODUCER_GROUP}\x01{group or name}\x02"
        text = (
            f"{user}{tags_pair}{keys_pair}{props.UNIQ_KEY}\x01{message_id}\x02{group_pair if group else ''}"
            f"{_HALF_TYPE_PAIR}{props.REAL_TOPIC}\x01{name}\x02{props.REAL_QUEUE_ID}\x01{queue}\x02"
            f"{_HALF_FLAG_PAIR}{'' if group else group_pair}"
        )
        data = b""
        cut = -1
        count = len(record)
        if (
            count <= limits.property_count_max
            and text.count("\x01") == count
            and text.count("\x02") == count
            and "" not in record
        ):
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                data = b""
            if len(data) > limits.properties_bytes_max:
                data = b""
        if not data:
            data = props.encode(record)  # anything unusual: its checks, and their error
        elif group and name.isascii():  # the text ends with the routing pairs (its queue id: digits)
            cut = len(data) - len(name) - len(queue) - _HALF_TAIL_FIXED
        keys.append(message_id)  # records.keys_of(record): the keys, then the message id
        fields: RecordFields = _MAKE_RECORD_FIELDS(
            _HALF_TOPIC_BYTES, 0, body, data, now, 0, _PREPARED, now, ctx.born_host.encode(), 0, 0,
            tuple(keys),
        )  # fmt: skip
        appended, durable = self._store.put_record_nowait(names.HALF_TOPIC, fields, True)
        half: HalfAppend = _MAKE_HALF_APPEND(topic, fields, record, appended, durable, cut)
        return half

    def half_answer_fields(self, half: HalfAppend) -> tuple[str, int]:
        """For a :meth:`half_append` whose record is durable: hand the half to the transaction service
        (as :meth:`send` does) and give what its response carries: (offset message id, which is also
        the transaction id; the real queue id); a half's queue offset is 0. No SendResult."""
        if self.half_stored is not None:  # it formats the id: once per half, not twice
            offset_id = self.half_stored(half.fields, half.properties, half.appended, half.cut)
        else:
            offset_id = self._offset_id_prefix() + hex16(half.appended.physical_offset)
        return offset_id, int(half.properties.get(props.REAL_QUEUE_ID, half.fields.queue_id))

    def prepare(self, message: Message, ctx: SendContext) -> tuple[TopicConfig, PutRequest]:
        """Validate one message and build the record to append (no I/O)."""
        topic, request, _ = self._prepare(message, ctx)
        return topic, request

    def _prepare_head(
        self, message: Message, ctx: SendContext, shared: dict[str, int] | None
    ) -> tuple[TopicConfig, int, int, dict[str, str], bytes, int | None]:
        """What every record of :meth:`_prepare` (and :meth:`half_append`) starts from: the message
        checked, its topic and queue, the time, its properties, body and delivery time."""
        message.validate()
        topic = self._topics.resolve(message.topic, for_write=True, message_type=message.message_type)
        if (
            shared is not None
            and message.message_group is None
            and (ctx.queue_id is None or ctx.queue_id < 0)
        ):
            queue_id = shared.get(topic.name, -1)
            if queue_id < 0:
                queue_id = shared[topic.name] = self._queue_for(None, topic, None)
        else:
            queue_id = self._queue_for(message.message_group, topic, ctx.queue_id)
        now = self._clock.now_ms()
        properties = self._properties(message, ctx)
        body = message.body if type(message.body) is bytes else bytes(message.body)
        return topic, queue_id, now, properties, body, self._deliver_ms(message, now)

    def _prepare(
        self, message: Message, ctx: SendContext, shared: dict[str, int] | None = None
    ) -> tuple[TopicConfig, PutRequest, dict[str, str]]:
        """:meth:`prepare`, plus the properties the record was given (so the result needs no decode).
        ``shared``: the queue the group-less messages of this request share, per topic (filled here)."""
        topic, queue_id, now, properties, body, deliver_ms = self._prepare_head(message, ctx, shared)
        if deliver_ms is None and not message.transactional:  # the common case: one record, built once
            properties.pop(props.DELAY, None)
            request = PutRequest(
                topic=topic.name,
                queue_id=queue_id,
                body=body,
                properties=props.encode(properties),
                tags_code=tag_hash(message.tags),
                born_timestamp_ms=now,
                born_host=ctx.born_host,
            )
            return topic, request, properties
        if message.transactional:
            # Transaction + delay: the delay is kept on the half message and starts at the commit.
            if message.delivery_timestamp_ms is not None and deliver_ms is not None:
                properties[props.TIMER_DELIVER_MS] = str(deliver_ms)
            return topic, self._half(topic.name, queue_id, body, now, properties, ctx), properties
        base = PutRequest(
            topic=topic.name,
            queue_id=queue_id,
            body=body,
            properties=b"",
            tags_code=tag_hash(message.tags),
            born_timestamp_ms=now,
            born_host=ctx.born_host,
        )
        if deliver_ms is not None and deliver_ms > now:
            return topic, self._delayed(base, properties, deliver_ms, message.delay_level), properties
        properties.pop(props.DELAY, None)
        return topic, _with_properties(base, properties), properties

    async def _send_batch(self, messages: Sequence[Message], ctx: SendContext) -> list[SendResult]:
        first = messages[0].topic
        if len(messages) > limits.batch_count_max:
            raise errors.PayloadTooLarge("batch message count", len(messages), limits.batch_count_max)
        total = sum(len(m.body) for m in messages)
        if total > limits.batch_bytes_max:
            raise errors.PayloadTooLarge("batch", total, limits.batch_bytes_max)
        prepared: list[tuple[Message, TopicConfig, PutRequest, dict[str, str]]] = []
        shared: dict[str, int] = {}  # the request's group-less messages share one queue (send lane too)
        for message in messages:
            if message.topic != first:
                raise errors.InvalidArgument("every message of a batch must have the same topic")
            if message.transactional:
                raise errors.InvalidArgument(
                    "transactional messages cannot be sent in a batch: send each in its own transaction"
                )
            if message.delivery_timestamp_ms is not None or message.delay_level:
                raise errors.InvalidArgument("delay messages cannot be sent in a batch")
            topic, request, properties = self._prepare(message, ctx, shared)
            prepared.append((message, topic, request, properties))
        appended = await self._store.put_batch([p[2] for p in prepared])
        return [
            self._result(m, r.topic, r.queue_id, t, a, d)
            for (m, t, r, d), a in zip(prepared, appended, strict=True)
        ]

    # ------------------------------------------------------------------------------- the send lane
    async def send_lean(
        self, topic_name: str, messages: Sequence[LeanMessage], ctx: SendContext
    ) -> list[SendResult]:
        """:meth:`send` for NORMAL/FIFO messages of one topic without building a :class:`Message` each:
        the same checks in the same order, the same queue choice, the same stored record and result."""
        if len(messages) > 1:
            lane = self._lane_batch(topic_name, messages, ctx)
            if lane is not None:
                sent, durable = lane
                await durable
                return self._lane_results(sent)
        return await self._send_lean_each(topic_name, messages, ctx)

    async def send_lean_batch(
        self, topic_name: str, messages: Sequence[LeanMessage], ctx: SendContext
    ) -> LaneSent:
        """:meth:`send_lean` answered as columns (:class:`LaneSent`: no :class:`SendResult` per message),
        for a door that only joins the ids (remoting's SEND_BATCH_MESSAGE response)."""
        lane = self._lane_batch(topic_name, messages, ctx) if len(messages) > 1 else None
        if lane is not None:
            sent, durable = lane
            await durable
            return sent
        results = await self._send_lean_each(topic_name, messages, ctx)
        return LaneSent(
            results[0].queue.topic, [r.queue.queue_id for r in results], [r.message_id for r in results],
            [r.queue_offset for r in results], [r.offset_message_id or r.message_id for r in results],
        )  # fmt: skip

    async def _send_lean_each(
        self, topic_name: str, messages: Sequence[LeanMessage], ctx: SendContext
    ) -> list[SendResult]:
        """The send lane message by message: a single message's path, and a batch's when
        :meth:`_lane_batch` declines it (it then raises the first error, in message order)."""
        appended = self.lane_append(topic_name, messages, ctx)
        await appended.durable
        return self.lane_results(appended)

    def lane_append(
        self, topic_name: str, messages: Sequence[LeanMessage], ctx: SendContext, shared: bool = False
    ) -> LaneAppend:
        """The synchronous first half of :meth:`_send_lean_each`: checks, queue choice and the append,
        message by message; the results (:meth:`lane_results`) are the caller's once ``durable``
        completes. The remoting door answers a single send from a callback on ``durable`` this way,
        without a task per request. ``shared``: the caller only adds done callbacks to ``durable``
        (never awaits it): one-message appends of a group then share one future."""
        if not messages:
            raise errors.InvalidArgument("a send request must carry at least one message")
        batch = len(messages) > 1
        if batch:
            if len(messages) > limits.batch_count_max:
                raise errors.PayloadTooLarge("batch message count", len(messages), limits.batch_count_max)
            total = sum(len(m.body) for m in messages)
            if total > limits.batch_bytes_max:
                raise errors.PayloadTooLarge("batch", total, limits.batch_bytes_max)
        records: list[RecordFields] = []
        message_ids: list[str] = []
        topic: TopicConfig | None = None
        resolved: dict[MessageType, TopicConfig] = {}
        topic_bytes = topic_name.encode()
        born_host = ctx.born_host.encode()
        producer_group = ctx.producer_group
        shared_queue: int | None = None
        for message in messages:
            group = message.message_group
            self._validate_lean(topic_name, message)
            message_type = MessageType.NORMAL if group is None else MessageType.FIFO
            topic = resolved.get(message_type)
            if topic is None:
                topic = self._lane_resolve(topic_name, message_type)
                if batch:
                    resolved[message_type] = topic
            if group is None and (ctx.queue_id is None or ctx.queue_id < 0):
                if shared_queue is None:  # one queue per request, as above
                    shared_queue = self._queue_for(None, topic, None)
                queue_id = shared_queue
            else:
                queue_id = self._queue_for(group, topic, ctx.queue_id)
            now = self._clock.now_ms()
            properties = message.properties.copy()
            tags = message.tags
            if tags:
                properties[props.TAGS] = tags
            if message.keys:
                properties[props.KEYS] = props.KEY_SEPARATOR.join(message.keys)
            message_id = message.message_id or msgid.new_message_id(now)
            properties[props.UNIQ_KEY] = message_id
            if group is not None:
                properties[props.SHARDING_KEY] = group
            if producer_group:
                properties[props.PRODUCER_GROUP] = producer_group
            properties[props.MESSAGE_TYPE] = "NORMAL" if group is None else "FIFO"  # message_type.name
            # flag, sys_flag, reconsume_times, prepared_transaction_offset: 0 (PutRequest's defaults);
            # the index keys are what records.index_keys finds in these properties
            encoded = props.encode(properties)
            keys = (*message.keys, message_id)
            code = tag_hash(tags)
            # one C call (_MAKE_RECORD_FIELDS): a NamedTuple's own __new__ is interpreted Python, per message
            record: RecordFields = _MAKE_RECORD_FIELDS(
                topic_bytes, queue_id, message.body, encoded, code, 0, 0, now, born_host, 0, 0, keys
            )
            records.append(record)
            message_ids.append(message_id)
        assert topic is not None
        appended, durable = self._store.put_records_columns(topic_name, records, shared)
        lane: LaneAppend = _MAKE_LANE_APPEND(topic.name, records, appended, message_ids, durable)
        return lane

    def lane_answer(self, lane: LaneAppend) -> tuple[str, int, int]:
        """A one-message :meth:`lane_append` whose ``durable`` completed, as the remoting door answers
        it: (offset message id, queue id, queue offset), what :meth:`lane_results` gives, without a
        :class:`SendResult`."""
        done = lane.appended
        return (
            self._offset_id_prefix() + hex16(done.physical_offsets[0]),
            lane.records[0].queue_id,
            done.queue_offsets[0],
        )

    def lane_answer_parts(self, lane: LaneAppend) -> tuple[str, int, int, int]:
        """:meth:`lane_answer` in parts: (the offset message id's host half, the record's physical
        offset, queue id, queue offset); the id is the first followed by ``hex16`` of the second."""
        done = lane.appended
        return (
            self._offset_id_prefix(),
            done.physical_offsets[0],
            lane.records[0].queue_id,
            done.queue_offsets[0],
        )

    def lane_results(self, lane: LaneAppend) -> list[SendResult]:
        """The send results of a :meth:`lane_append` whose ``durable`` completed."""
        prefix = self._offset_id_prefix()
        name = lane.topic
        results: list[SendResult] = []
        queue: MessageQueue | None = None
        done = lane.appended
        for record, physical_offset, queue_offset, message_id in zip(
            lane.records, done.physical_offsets, done.queue_offsets, lane.message_ids, strict=True
        ):
            if queue is None or queue.queue_id != record.queue_id:
                queue = self._lane_queues.get((name, record.queue_id))
                if queue is None:  # a frozen value: one per queue serves every result
                    queue = MessageQueue(name, record.queue_id, self._broker_name)
                    if len(self._lane_queues) >= _LANE_TOPICS_MAX:
                        self._lane_queues.clear()
                    self._lane_queues[(name, record.queue_id)] = queue
            results.append(
                SendResult(
                    message_id=message_id,
                    queue=queue,
                    queue_offset=queue_offset,
                    offset_message_id=prefix + f"{physical_offset:016X}",
                )
            )
        return results

    def _lane_batch(
        self, topic_name: str, messages: Sequence[LeanMessage], ctx: SendContext
    ) -> tuple[LaneSent, Awaitable[None]] | None:
        """A batch of the send lane appended column by column: the checks of :meth:`_send_lean_each`
        made once per batch or per distinct value, one clock reading, the message ids made at once,
        each message's properties laid out by one format (the bytes ``props.encode`` gives for the
        dict the lane builds). None, having changed nothing but the id sequence, when any check fails
        or a message is unusual (user properties naming a key the lane sets): the caller then sends it
        message by message, which raises the first error in order."""
        count = len(messages)
        if count > limits.batch_count_max:
            return None
        bodies, user_properties, tags_col, keys_col, ids_col, groups = zip(*messages, strict=True)
        total, shortest, longest = _sizes(bodies)
        if total > limits.batch_bytes_max:
            return None
        try:
            self._validate_lean(topic_name, messages[0])
            if shortest == 0 or longest > limits.body_bytes_max:
                return None
            distinct_tags = set(tags_col)
            for tags in distinct_tags:
                check_content(1, tags, (), None)
            if any(keys_col):
                for keys in keys_col:
                    check_content(1, None, keys, None)
            distinct_groups = set(groups)
            types: dict[str | None, TopicConfig] = {}
            for group in distinct_groups:
                if group is not None:
                    check_content(1, None, (), group)
                message_type = MessageType.NORMAL if group is None else MessageType.FIFO
                types[group] = self._lane_resolve(topic_name, message_type)
        except errors.TxmqError:
            return None
        if len({config.name for config in types.values()}) != 1:
            return None  # pragma: no cover - one topic name resolves to one config
        now = self._clock.now_ms()
        missing = ids_col.count(None) + ids_col.count("")
        if missing:
            fresh = iter(msgid.new_message_ids(now, missing))
            message_ids = [message_id or next(fresh) for message_id in ids_col]
        else:
            message_ids = list(ids_col)
        producer_group = ctx.producer_group
        # every value the lane writes, at once: a separator in any would break a pair (props.encode
        # rejects it, so the message-by-message path raises its error)
        values = "".join(
            (*[t for t in distinct_tags if t], *chain.from_iterable(keys_col), *message_ids,
             *[g for g in distinct_groups if g], producer_group or "")
        )  # fmt: skip
        if props.NAME_VALUE_SEPARATOR in values or props.PROPERTY_SEPARATOR in values:
            return None
        tag_parts = {tags: f"{props.TAGS}\x01{tags}\x02" if tags else "" for tags in distinct_tags}
        tails = {group: _lane_tail(producer_group, group) for group in distinct_groups}
        uniq = props.UNIQ_KEY
        texts = [
            f"{tag_parts[tags]}{_lane_keys_part(keys) if keys else ''}{uniq}\x01{message_id}\x02"
            f"{tails[group]}"
            for tags, keys, message_id, group in zip(tags_col, keys_col, message_ids, groups, strict=True)
        ]
        try:
            encoded = [text.encode() for text in texts]
        except UnicodeEncodeError:
            return None
        if any(user_properties):
            for i, user in enumerate(user_properties):
                if user:
                    if not user.keys().isdisjoint(_LANE_SET_KEYS) or "" in user:
                        return None
                    try:
                        encoded[i] = props.encode(user) + encoded[i]
                    except errors.TxmqError:
                        return None
                    if len(user) + texts[i].count("\x02") > limits.property_count_max:
                        return None
        if _sizes(encoded)[2] > limits.properties_bytes_max:
            return None
        topic = next(iter(types.values()))
        explicit = ctx.queue_id
        if explicit is not None and explicit >= 0:
            if explicit >= topic.queues:
                return None
            queue_ids: list[int] = [explicit] * count
        elif len(distinct_groups) == 1 and None in distinct_groups:
            # a request's messages without a message group share one queue, as the Apache proxy sends
            # them (one queue picked per SendMessage, the messages as one batch there)
            queue_ids = [self._queue_for(None, topic, None)] * count
        else:  # FIFO: each message group keeps its own queue, whatever request it came in
            shared = self._queue_for(None, types[None], None) if None in types else 0
            queue_ids = [
                shared if group is None else self._queue_for(group, types[group], None) for group in groups
            ]
        codes = {tags: tag_hash(tags) for tags in distinct_tags}
        index_keys = [
            (*keys, message_id) if keys else (message_id,)
            for keys, message_id in zip(keys_col, message_ids, strict=True)
        ]
        topic_bytes = topic_name.encode()
        born_host = ctx.born_host.encode()
        zeros = (0,) * count
        # one distinct tag (the usual batch): its code repeated, no dict lookup per message
        tags_codes = (
            (*codes.values(),) * count if len(codes) == 1 else tuple(map(codes.__getitem__, tags_col))
        )
        # the records as the store's columns (codec.Columns: RecordFields field by field), built
        # column-wise: no RecordFields per message for the store to transpose back
        columns = (
            (topic_bytes,) * count, tuple(queue_ids), bodies, tuple(encoded),
            tags_codes, zeros, zeros, (now,) * count, (born_host,) * count,
            zeros, zeros, tuple(index_keys),
        )  # fmt: skip
        appended, durable = self._store.put_columns(topic_name, columns)
        ids = offset_ids(self._offset_id_prefix(), appended.physical_offsets)
        return LaneSent(topic.name, queue_ids, message_ids, appended.queue_offsets, ids), durable

    def lane_tail(self, producer_group: str | None) -> bytes | None:
        """The bytes the lane writes after a NORMAL message's id (producer group, message type: what
        :func:`_lane_tail` lays out), for a door that lays out the records' properties itself
        (:meth:`lane_columns`); None when the group holds a separator or is not UTF-8 (the batch then
        goes the way of :meth:`_lane_batch`, which judges it)."""
        tails = self._lane_tails
        if producer_group in tails:
            return tails[producer_group]
        tail: bytes | None = None
        if producer_group is None or (
            props.NAME_VALUE_SEPARATOR not in producer_group
            and props.PROPERTY_SEPARATOR not in producer_group
        ):
            try:
                tail = _lane_tail(producer_group, None).encode("utf-8")
            except UnicodeEncodeError:
                tail = None
        if len(tails) >= _LANE_TOPICS_MAX:
            tails.clear()
        tails[producer_group] = tail
        return tail

    def lane_columns(
        self, topic_name: str, scan: LaneScan, ctx: SendContext, shared: bool = True
    ) -> tuple[LaneSent, Awaitable[None]] | None:
        """A batch of NORMAL messages whose columns a door read straight from its request
        (:class:`LaneScan`: remoting's SEND_BATCH_MESSAGE through ``server/remoting/_lanescan.c``)
        appended as :meth:`_lane_batch` appends the same messages: the same checks (those of each
        message made by the scan, those of the batch here), queue, clock reading and columns, so the
        same records. None, having changed nothing, when a check fails: the caller then sends the
        batch the general way, which gives the error. The awaitable is the open group's shared
        waiter (``put_columns(shared=True)``): the caller only adds done callbacks to it, never
        awaits it; in SYNC mode they run as the group completes, before the group's dispatch.
        ``shared=False`` (the gRPC door's ``_sendscan``, which awaits it): the append's own waiter,
        as :meth:`_lane_batch` gets it."""
        bodies, encoded, tags_codes, index_keys, message_ids, body_total = scan
        count = len(bodies)
        if count < 2 or count > limits.batch_count_max or body_total > limits.batch_bytes_max:
            return None
        placed = self._lane_place(topic_name, ctx)
        if placed is None:
            return None
        topic, queue_id, topic_bytes = placed
        now = self._clock.now_ms()
        zeros = (0,) * count
        columns = (
            (topic_bytes,) * count, (queue_id,) * count, bodies, encoded, tags_codes, zeros, zeros,
            (now,) * count, (ctx.born_host.encode(),) * count, zeros, zeros, index_keys,
        )  # fmt: skip
        # shared: the door only adds a done callback (a ``Deferred``), so in SYNC mode the answer is
        # written as the group completes, before its ConsumeQueue and index entries (answer first)
        appended, durable = self._store.put_columns(topic_name, columns, shared)
        ids = offset_ids(self._offset_id_prefix(), appended.physical_offsets)
        queue_ids = [queue_id] * count
        return LaneSent(topic.name, queue_ids, message_ids, appended.queue_offsets, ids), durable

    def lane_one(
        self,
        topic_name: str,
        scan: LaneScan,
        ctx: SendContext,
        shared: bool = False,
        fill: KeylessFill | None = None,
        tail: bytes | None = None,
    ) -> LaneAppend | None:
        """A one-message :class:`LaneScan` (the gRPC door's ``_sendscan``, the remoting door's
        ``_lanescan.one_scan``: a NORMAL message whose content checks the scan made) appended as
        :meth:`lane_append` appends the same message: the topic's check, queue choice, clock reading
        and record. None, having changed nothing, when the topic is refused or the scan holds more
        messages: the caller then takes :meth:`lane_append`, which gives the error. The awaitable is
        the append's own (the caller awaits it), or with ``shared`` the open group's shared waiter
        (the caller only adds done callbacks to it), as :meth:`lane_append` gives them.

        A keyless scan (no message id: ``one_scan(..., keyless=True)``, its properties ending with
        ``UNIQ_KEY\x01``) gets the id ``lane_append`` would make, ``msgid.new_message_id(now)`` after
        the clock reading, by ``fill`` (``_lanescan.keyless_fill``: the id, then ``tail``, the
        producer group's :meth:`lane_tail` the scan was given); without them it is declined."""
        bodies, encoded, tags_codes, index_keys, message_ids, _ = scan
        if len(bodies) != 1:
            return None
        keyless = not message_ids
        if keyless and (fill is None or tail is None):
            return None
        placed = self._lane_place(topic_name, ctx)
        if placed is None:
            return None
        topic, queue_id, topic_bytes = placed
        now = self._clock.now_ms()
        properties = encoded[0]
        keys = index_keys[0]
        if keyless and tail is not None and fill is not None:  # the id made here, as lane_append makes it
            properties, keys, message_id = fill(
                properties, keys, tail, msgid.id_prefix(now), msgid.next_sequence()
            )
            message_ids = [message_id]
        record: RecordFields = _MAKE_RECORD_FIELDS(
            topic_bytes, queue_id, bodies[0], properties, tags_codes[0], 0, 0, now,
            ctx.born_host.encode(), 0, 0, keys,
        )  # fmt: skip
        records = [record]
        appended, durable = self._store.put_records_columns(topic_name, records, shared)
        lane: LaneAppend = _MAKE_LANE_APPEND(topic.name, records, appended, message_ids, durable)
        return lane

    def _lane_results(self, sent: LaneSent) -> list[SendResult]:
        name = sent.topic
        results: list[SendResult] = []
        queue: MessageQueue | None = None
        for queue_id, message_id, queue_offset, offset_id in zip(
            sent.queue_ids, sent.message_ids, sent.queue_offsets, sent.offset_ids, strict=True
        ):
            if queue is None or queue.queue_id != queue_id:
                queue = self._lane_queue(name, queue_id)
            results.append(SendResult(message_id=message_id, queue=queue, queue_offset=queue_offset,
                                      offset_message_id=offset_id))  # fmt: skip
        return results

    def _lane_queue(self, name: str, queue_id: int) -> MessageQueue:
        queue = self._lane_queues.get((name, queue_id))
        if queue is None:  # a frozen value: one per queue serves every result
            queue = MessageQueue(name, queue_id, self._broker_name)
            if len(self._lane_queues) >= _LANE_TOPICS_MAX:
                self._lane_queues.clear()
            self._lane_queues[(name, queue_id)] = queue
        return queue

    def _offset_id_prefix(self) -> str:
        """The host and port half of :func:`msgid.offset_message_id` (the same for every record)."""
        store_host = self._store_host()
        cached = self._id_prefix
        if cached is None or cached[0] != store_host:  # kept per store host: no (host, port) per call
            host, port = self._store_address()
            cached = self._id_prefix = (store_host, msgid.offset_message_id(host, port, 0)[:16])
        return cached[1]

    def _validate_lean(self, topic: str, message: LeanMessage) -> None:
        """:meth:`Message.validate` for a lane message (bytes body, no delay, not transactional)."""
        if topic not in self._lane_topics:
            names.validate_topic(topic)
            if len(self._lane_topics) < _LANE_TOPICS_MAX:
                self._lane_topics.add(topic)
        check_content(len(message.body), message.tags, message.keys, message.message_group)

    def _lane_check_name(self, topic_name: str) -> None:
        """``names.validate_topic``, remembered for up to ``_LANE_TOPICS_MAX`` names that passed."""
        if topic_name not in self._lane_topics:
            names.validate_topic(topic_name)
            if len(self._lane_topics) < _LANE_TOPICS_MAX:
                self._lane_topics.add(topic_name)

    def _lane_place(self, topic_name: str, ctx: SendContext) -> tuple[TopicConfig, int, bytes] | None:
        """A scanned NORMAL request's topic, queue (the explicit one, else the next in round robin:
        one queue for all its messages, as ``_lane_batch`` picks it) and topic name's bytes; None,
        having changed nothing, when the topic is refused or the explicit queue does not exist (the
        general path then gives the error)."""
        normal = self._lane_normal.get(topic_name)
        if normal is None or self._topic_configs.get(topic_name) is not normal[0]:
            try:
                self._lane_check_name(topic_name)
                topic = self._lane_resolve(topic_name, MessageType.NORMAL)
            except errors.TxmqError:
                return None
            # the name passed validate_topic and this config passed resolve: while the registry
            # holds that same (frozen) config both pass again, so one lookup answers for them
            normal = (topic, topic_name.encode())
            if len(self._lane_normal) >= _LANE_TOPICS_MAX:
                self._lane_normal.clear()
            self._lane_normal[topic_name] = normal
        topic, topic_bytes = normal
        explicit = ctx.queue_id
        if explicit is not None and explicit >= 0:
            if explicit >= topic.queues:
                return None
            return topic, explicit, topic_bytes
        return topic, self._queue_for(None, topic, None), topic_bytes

    def _lane_resolve(self, name: str, message_type: MessageType) -> TopicConfig:
        """``TopicRegistry.resolve(name, for_write=True, message_type=...)``, remembered: a config
        that passed is a frozen value, so while the registry holds that same object it passes again
        (a changed topic is a new object and is resolved afresh)."""
        config = self._topic_configs.get(name)
        key = (name, message_type)
        if config is not None and self._lane_resolved.get(key) is config:
            return config
        config = self._topics.resolve(name, for_write=True, message_type=message_type)
        if len(self._lane_resolved) >= _LANE_TOPICS_MAX:
            self._lane_resolved.clear()
        self._lane_resolved[key] = config
        return config

    def _queue_for(self, group: str | None, topic: TopicConfig, explicit: int | None) -> int:
        """The explicit queue if valid, the message group's queue (FIFO), else the next in round robin."""
        if explicit is not None and explicit >= 0:
            if explicit >= topic.queues:
                raise errors.InvalidArgument(
                    f"queue {explicit} does not exist: topic {topic.name} has {topic.queues} queues"
                )
            return explicit
        if group is not None:
            return fifo_queue_of(group, topic.queues)
        counter = self._round_robin.get(topic.name)
        if counter is None:
            counter = self._round_robin[topic.name] = itertools.count()
        return next(counter) % topic.queues

    def _properties(self, message: Message, ctx: SendContext) -> dict[str, str]:
        properties = {k: v for k, v in message.properties.items() if k not in props.SYSTEM_KEYS}
        for key in (props.DELAY, props.CHECK_IMMUNITY_TIME_IN_SECONDS):
            if key in message.properties:
                properties[key] = message.properties[key]
        if message.tags:
            properties[props.TAGS] = message.tags
        if message.keys:
            properties[props.KEYS] = props.KEY_SEPARATOR.join(message.keys)
        properties[props.UNIQ_KEY] = message.message_id or msgid.new_message_id(self._clock.now_ms())
        if message.message_group is not None:
            properties[props.SHARDING_KEY] = message.message_group
        if message.delay_level:
            properties[props.DELAY] = str(message.delay_level)
        if message.check_immunity_s is not None:
            properties[props.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(message.check_immunity_s)
        if ctx.producer_group:
            properties[props.PRODUCER_GROUP] = ctx.producer_group
        properties[props.MESSAGE_TYPE] = message.message_type.name
        return properties

    def _deliver_ms(self, message: Message, now: int) -> int | None:
        if message.delivery_timestamp_ms is not None:
            if message.delivery_timestamp_ms > now + self._delay_ms_max:
                raise errors.InvalidDeliveryTime(
                    f"delivery time is more than {self._delay_ms_max // 1000} s in the future"
                )
            return message.delivery_timestamp_ms
        if message.delay_level:
            return levels_mod.deliver_at_ms(message.delay_level, now, self._levels)
        return None

    def _delayed(
        self, base: PutRequest, properties: dict[str, str], deliver_ms: int, level: int | None
    ) -> PutRequest:
        properties[props.REAL_TOPIC] = base.topic
        properties[props.REAL_QUEUE_ID] = str(base.queue_id)
        properties[props.TIMER_DELIVER_MS] = str(deliver_ms)
        if level:
            clamped = levels_mod.clamp_level(level, self._levels)
            properties[props.DELAY] = str(clamped)
            topic, queue_id = names.SCHEDULE_TOPIC, clamped - 1
        else:
            topic, queue_id = names.TIMER_TOPIC, timer_queue_of(deliver_ms, self._timer_queues)
        return _with_properties(
            PutRequest(
                topic=topic,
                queue_id=queue_id,
                body=base.body,
                tags_code=deliver_ms,
                born_timestamp_ms=base.born_timestamp_ms,
                born_host=base.born_host,
            ),
            properties,
        )

    @staticmethod
    def _half_properties(topic: str, queue_id: int, properties: dict[str, str], ctx: SendContext) -> None:
        """A half message's properties: its real topic and queue, the transaction flag, the group."""
        properties[props.REAL_TOPIC] = topic
        properties[props.REAL_QUEUE_ID] = str(queue_id)
        properties[props.TRAN_MSG] = "true"
        properties.setdefault(props.PRODUCER_GROUP, ctx.producer_group or topic)

    def _half(
        self, topic: str, queue_id: int, body: bytes, now: int, properties: dict[str, str], ctx: SendContext
    ) -> PutRequest:
        """A half message: stored in the half topic, real topic and queue in its properties."""
        self._half_properties(topic, queue_id, properties, ctx)
        return PutRequest(
            topic=names.HALF_TOPIC,
            queue_id=0,
            body=body,
            properties=props.encode(properties),
            tags_code=now,  # broker time: the check service finds old halves by it
            sys_flag=SysFlag.TRANSACTION_PREPARED,
            born_timestamp_ms=now,
            born_host=ctx.born_host,
            index_keys=keys_of(properties),  # what records.index_keys finds in these properties
        )

    def _result(
        self,
        message: Message,
        stored_topic: str,
        stored_queue_id: int,
        topic: TopicConfig,
        appended: AppendResult,
        decoded: dict[str, str],
    ) -> SendResult:
        """``stored_topic``, ``stored_queue_id``: where the record was appended; ``decoded``: the
        properties it was encoded from (nothing is read back)."""
        is_half = message.transactional
        # only a delayed message is stored under another topic than its own (halves are handled above)
        is_delayed = not is_half and stored_topic != topic.name
        message_id = decoded[props.UNIQ_KEY]
        real_queue = int(decoded.get(props.REAL_QUEUE_ID, stored_queue_id))
        host, port = self._store_address()
        offset_id = msgid.offset_message_id(host, port, appended.physical_offset)
        return SendResult(
            message_id=message_id,
            queue=MessageQueue(topic.name, real_queue, self._broker_name),
            queue_offset=appended.queue_offset if not (is_half or is_delayed) else 0,
            transaction_id=offset_id if is_half else None,
            offset_message_id=offset_id,
            recall_handle=encode_recall_handle(stored_topic, stored_queue_id, appended)
            if is_delayed
            else None,
        )

    def delayed_from_commit(self, half: StoredRecord, decoded: dict[str, str], now_ms: int) -> PutRequest:
        """A committed transactional message that asked for a delay: the delay starts at the commit."""
        real_topic, real_queue = real_destination(decoded, half)
        level = int(decoded.get(props.DELAY, "0") or 0)
        if level > 0:
            deliver_ms = levels_mod.deliver_at_ms(level, now_ms, self._levels)
        else:
            deliver_ms = now_ms + max(0, int(decoded[props.TIMER_DELIVER_MS]) - half.born_timestamp_ms)
        base = to_real_topic(half, decoded, sys_flag=SysFlag.TRANSACTION_COMMIT)
        properties = props.decode(base.properties)
        properties.pop(props.DELAY, None)
        return self._delayed(
            dataclasses.replace(base, topic=real_topic, queue_id=real_queue),
            properties,
            deliver_ms,
            level or None,
        )

    def _store_host(self) -> str:
        return self._store.config.store_host

    def _store_address(self) -> tuple[str, int]:
        """(host, port) of the store, parsed once: every send result names it in its offset id."""
        store_host = self._store_host()
        if self._address is None or self._address[0] != store_host:
            self._address = (store_host, split_host(store_host))
        return self._address[1]


def _with_properties(request: PutRequest, properties: dict[str, str]) -> PutRequest:
    return PutRequest(
        topic=request.topic,
        queue_id=request.queue_id,
        body=request.body,
        properties=props.encode(properties),
        tags_code=request.tags_code,
        flag=request.flag,
        sys_flag=request.sys_flag,
        born_timestamp_ms=request.born_timestamp_ms,
        born_host=request.born_host,
        reconsume_times=request.reconsume_times,
        prepared_transaction_offset=request.prepared_transaction_offset,
    )


def encode_recall_handle(topic: str, queue_id: int, appended: AppendResult) -> str:
    return f"{topic}:{queue_id}:{appended.queue_offset}:{appended.physical_offset}"


def decode_recall_handle(handle: str) -> tuple[str, int, int, int]:
    try:
        topic, queue_id, queue_offset, physical = handle.rsplit(":", 3)
        return topic, int(queue_id), int(queue_offset), int(physical)
    except ValueError:
        raise errors.InvalidArgument(f"malformed recall handle {handle[:64]!r}") from None


MESSAGE_TYPES_ROUTED = (MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION)


# NamedTuples made per message by one C call each (fastinit.tuple_maker: tuple.__new__'s object without
# the class's interpreted __new__ and without an argument tuple); Final: compiled code reads C statics
_MAKE_RECORD_FIELDS: Final = tuple_maker(RecordFields)
_MAKE_HALF_APPEND: Final = tuple_maker(HalfAppend)
_MAKE_LANE_APPEND: Final = tuple_maker(LaneAppend)
