"""One message's SEND_MESSAGE_V2 over remoting: its header (JSON or ROCKETMQ binary) and ``SendResult``.

The per-message half of a single send (``RemotingTransport._single_request`` and the result read
from the answer), kept apart from the transport's coroutines so it is compiled with mypyc
(``build_native.py``): it runs once per send, pipelined sends run it tens of thousands of times a
second. ``tests/unit/test_send_header_template.py`` holds the frames byte for byte to the general
way (``headers.send_v2_fields``), ``tests/unit/test_single_send.py`` the results to
``headers.parse_send_response``.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Sequence
from typing import Any, Final

from txmq.client import _remoting_convert as conv
from txmq.common import errors, limits, msgid, names
from txmq.common import properties as props
from txmq.common.fastinit import slot_maker
from txmq.common.message import EMPTY_PROPERTIES, Message, MessageQueue, SendResult
from txmq.protocol.remoting import headers
from txmq.protocol.remoting.codes import TRANSACTION_PREPARED_TYPE, ResponseCode
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.frame import binary_ext, binary_pair, json_quote
from txmq.protocol.remoting.status import error_for_response

SEND_OK: Final = (
    ResponseCode.SUCCESS,
    ResponseCode.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
ID_MARK: Final = "<ID>"  # stands for the message id in a plain message's property template (no group has "<")
BORN_TO_PROPERTIES: Final = '","h":"0","i":'  # the SEND_MESSAGE_V2 header between born time and properties
_DIGITS_MAX: Final = 18  # headers._plain_int's bound: int() and Java's parseLong read these alike


def plain(message: Message) -> bool:
    """A message whose properties are only its id, the transaction flag and the producer group."""
    return (
        not message.properties
        and not message.tags
        and not message.keys
        and message.message_group is None
        and not message.delay_level
        and message.delivery_timestamp_ms is None
        and message.check_immunity_s is None
    )


def props_text(properties: dict[str, str]) -> str:
    return props.encode(properties).decode("utf-8")


def _plain_split(
    cache: dict[tuple[str, bool], tuple[str, str] | None],
    max_entries: int,
    producer_group: str,
    transactional: bool,
    quoted: bool,
) -> tuple[str, str] | None:
    """A plain message's property text (JSON-quoted when ``quoted``) split where its id goes, cached
    per (group, transactional) in ``cache``; None when the text does not split once."""
    key = (producer_group, transactional)
    if key in cache:
        return cache[key]
    if len(cache) >= max_entries:
        cache.clear()
    template = Message("t", b"", transactional=transactional)
    text = props_text(conv.message_properties(template, ID_MARK, producer_group))
    if quoted:
        text = json_quote(text)
    before, mark, after = text.partition(ID_MARK)
    parts = (before, after) if mark and ID_MARK not in after else None
    cache[key] = parts
    return parts


class SendHeaders:
    """The constant parts of SEND_MESSAGE_V2 headers as JSON text, per (group, queue, flag): the
    fields before the born time, and those after the properties, rendered as ``headers.send_v2_fields``
    and ``frame`` would (tests/unit/test_remoting_frame.py compares the frames byte for byte)."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._parts: dict[tuple[str, str, int, int, str], tuple[str, str]] = {}
        self._plain: dict[tuple[str, bool], tuple[str, str] | None] = {}
        self._max_entries = max_entries

    def plain_properties(self, producer_group: str, transactional: bool) -> tuple[str, str] | None:
        """The properties field of a plain message (``plain``) as quoted JSON text around its message
        id: ``json_quote(props_text(conv.message_properties(...)))`` split where the id goes; None
        when that text does not split once (then the caller goes the general way)."""
        return _plain_split(self._plain, self._max_entries, producer_group, transactional, True)

    def parts(self, producer_group: str, mq: MessageQueue, queue_id: int, sys_flag: int) -> tuple[str, str]:
        key = (producer_group, mq.topic, queue_id, sys_flag, mq.broker_name)
        parts = self._parts.get(key)
        if parts is None:
            if len(self._parts) >= self._max_entries:
                self._parts.clear()
            parts = render_parts(producer_group, mq, queue_id, sys_flag)
            self._parts[key] = parts
        return parts

    def request(
        self, mq: MessageQueue, message: Message, producer_group: str, queue_id: int
    ) -> tuple[str, bytes, str]:
        """One message's SEND_MESSAGE_V2 header as JSON text, its body and its message id: the constant
        fields once per queue, only the time and the properties per message."""
        now = int(time.time() * 1000)
        head, tail = self.parts(producer_group, mq, queue_id, conv.sys_flag_of(message))
        given = message.message_id
        if given is None and plain(message):
            around = self.plain_properties(producer_group, message.transactional)
            if around is not None:
                # our own id (hex: nothing to escape) between the group's quoted property text parts
                message_id = msgid.new_message_id(now)
                return (
                    f"{head}{now}{BORN_TO_PROPERTIES}{around[0]}{message_id}{around[1]}{tail}",
                    bytes(message.body),
                    message_id,
                )
        message_id = given or msgid.new_message_id(now)  # an empty id is made, as before
        properties = conv.properties_text(message, message_id, producer_group)
        return (
            f"{head}{now}{BORN_TO_PROPERTIES}{json_quote(properties)}{tail}",
            bytes(message.body),
            message_id,
        )


def render_parts(producer_group: str, mq: MessageQueue, queue_id: int, sys_flag: int) -> tuple[str, str]:
    ext = headers.send_v2_fields(
        producer_group or "DEFAULT_PRODUCER", mq.topic, names.DEFAULT_TOPIC, limits.queues_per_topic_default,
        queue_id, sys_flag, 0, "", False, mq.broker_name,
    )  # fmt: skip
    items = [json_quote(k) + ":" + json_quote(v) for k, v in ext.items()]
    keys = list(ext)
    born, after = keys.index("g"), keys.index("i") + 1
    head = "{" + ",".join(items[:born]) + ',"g":"'
    if ext["h"] != "0" or keys[born + 1 : after] != ["h", "i"]:
        raise AssertionError("send_v2_fields changed its layout: update BORN_TO_PROPERTIES")
    return head, "".join("," + item for item in items[after:]) + "}"


BINARY_H: Final = binary_pair("h", "0")  # the SEND_MESSAGE_V2 pair between born time and properties
# a born time of 13 digits (2001-09-09 to 2286-11-20) and our ids of 34 hex characters: their pairs'
# key and length bytes are constant (binary_pair's layout: int16 key length, key, int32 value length)
_BORN_DIGITS: Final = 13
_BORN_KEY: Final = binary_pair("g", "0" * _BORN_DIGITS)[:-_BORN_DIGITS]
_ID_CHARS: Final = 34
_PROPERTIES_KEY: Final = binary_pair("i", "")[:-4]
_NOT_SPLIT: Final = (b"", b"", b"")  # plain_frame_parts' None, kept (a real head is never empty)


class BinarySendHeaders:
    """``SendHeaders`` for a ROCKETMQ channel: the constant pairs of SEND_MESSAGE_V2 headers before the
    born time and after the properties as ``frame.binary_ext`` bytes, per (group, queue, flag), and a
    plain message's property text around its id (tests/unit/test_send_header_template.py compares the
    frames byte for byte with the generic encoding)."""

    def __init__(self, max_entries: int = 4096) -> None:
        self._parts: dict[tuple[str, str, int, int, str], tuple[bytes, bytes]] = {}
        self._plain: dict[tuple[str, bool], tuple[str, str] | None] = {}
        self._plain_bytes: dict[tuple[str, bool], tuple[bytes, bytes]] = {}
        # (group, topic, queue id, broker name, transactional) -> plain_frame_parts(...), for plain_single
        self._plain_frames: dict[tuple[str, str, int, str, bool], tuple[bytes, bytes, bytes]] = {}
        self._max_entries = max_entries

    def plain_properties(self, producer_group: str, transactional: bool) -> tuple[str, str] | None:
        """The properties text of a plain message (``plain``) split where its id goes, or None."""
        return _plain_split(self._plain, self._max_entries, producer_group, transactional, False)

    def plain_pairs(
        self, producer_group: str, transactional: bool, around: tuple[str, str]
    ) -> tuple[bytes, bytes]:
        """A plain message's header bytes from the end of its born time to its id (``BINARY_H``, the
        properties pair's key and length for an id of ``_ID_CHARS``, the text before the id) and
        after its id, as ``binary_pair`` writes them; ``around``: ``plain_properties``' split."""
        key = (producer_group, transactional)
        pairs = self._plain_bytes.get(key)
        if pairs is None:
            if len(self._plain_bytes) >= self._max_entries:
                self._plain_bytes.clear()
            before, after = around[0].encode("utf-8"), around[1].encode("utf-8")
            length = (len(before) + _ID_CHARS + len(after)).to_bytes(4, "big")
            pairs = (BINARY_H + _PROPERTIES_KEY + length + before, after)
            self._plain_bytes[key] = pairs
        return pairs

    def parts(
        self, producer_group: str, mq: MessageQueue, queue_id: int, sys_flag: int
    ) -> tuple[bytes, bytes]:
        key = (producer_group, mq.topic, queue_id, sys_flag, mq.broker_name)
        parts = self._parts.get(key)
        if parts is None:
            if len(self._parts) >= self._max_entries:
                self._parts.clear()
            ext = headers.send_v2_fields(
                producer_group or "DEFAULT_PRODUCER", mq.topic, names.DEFAULT_TOPIC,
                limits.queues_per_topic_default, queue_id, sys_flag, 0, "", False, mq.broker_name,
            )  # fmt: skip
            items = list(ext.items())
            keys = list(ext)
            born, after = keys.index("g"), keys.index("i") + 1
            if ext["h"] != "0" or keys[born + 1 : after] != ["h", "i"]:
                raise AssertionError("send_v2_fields changed its layout: update BINARY_H")
            parts = (binary_ext(dict(items[:born])), binary_ext(dict(items[after:])))
            self._parts[key] = parts
        return parts

    def plain_frame_parts(
        self, producer_group: str, mq: MessageQueue, queue_id: int, transactional: bool
    ) -> tuple[bytes, bytes, bytes] | None:
        """A plain message's header bytes around its born time and id, as ``request_py`` joins them:
        (the pairs before the born time and the born time pair's key and length; from after the born
        time to the id; after the id), kept per (group, queue, transaction flag); None when its
        properties do not split around the id (then ``request_py`` goes the general way)."""
        key = (producer_group, mq.topic, queue_id, mq.broker_name, transactional)
        kept = self._plain_frames.get(key)
        if kept is not None:  # one lookup; _NOT_SPLIT kept for a group whose properties do not split
            return kept if kept[0] else None
        if len(self._plain_frames) >= self._max_entries:
            self._plain_frames.clear()
        sys_flag = TRANSACTION_PREPARED_TYPE if transactional else 0  # conv.sys_flag_of's
        head, tail = self.parts(producer_group, mq, queue_id, sys_flag)
        made: tuple[bytes, bytes, bytes] | None = None
        try:
            around = self.plain_properties(producer_group, transactional)
            if around is not None:
                before, after = self.plain_pairs(producer_group, transactional, around)
                made = (head + _BORN_KEY, before, after + tail)
        except (errors.TxmqError, ValueError):
            made = None  # a group the properties refuse: request_py raises that for a plain message
        self._plain_frames[key] = _NOT_SPLIT if made is None else made
        return made

    def request(
        self, mq: MessageQueue, message: Message, producer_group: str, queue_id: int
    ) -> tuple[bytes, bytes, str]:
        """One message's SEND_MESSAGE_V2 header as ``frame.binary_ext`` bytes, its body and its message
        id: a plain message's in one C call (``_batchsend.plain_single``: its checks, the id, the born
        time and the header's cached parts joined), else (or without the extension) ``request_py``,
        the reference (tests/property/test_plain_single_native.py holds them byte-identical)."""
        if _PLAIN_SINGLE is not None:
            now = int(time.time() * 1000)
            transactional = message.transactional
            parts = self.plain_frame_parts(producer_group, mq, queue_id, transactional)
            if parts is not None:
                made: tuple[bytes, bytes, str] | None = _PLAIN_SINGLE(
                    message, transactional, parts[0], now, parts[1], msgid.id_prefix(now), msgid.SEQUENCE,
                    parts[2], EMPTY_PROPERTIES,
                )  # fmt: skip
                if made is not None:
                    return made
            return self._request_at(mq, message, producer_group, queue_id, now)
        return self.request_py(mq, message, producer_group, queue_id)

    def request_py(
        self, mq: MessageQueue, message: Message, producer_group: str, queue_id: int
    ) -> tuple[bytes, bytes, str]:
        """``request`` in Python: the constant pairs once per queue, only the time and the properties
        per message."""
        return self._request_at(mq, message, producer_group, queue_id, int(time.time() * 1000))

    def _request_at(
        self, mq: MessageQueue, message: Message, producer_group: str, queue_id: int, now: int
    ) -> tuple[bytes, bytes, str]:
        head, tail = self.parts(producer_group, mq, queue_id, conv.sys_flag_of(message))
        given = message.message_id
        around = None
        if given is None and plain(message):
            around = self.plain_properties(producer_group, message.transactional)
        if around is not None:  # our own id between the group's property text parts
            message_id = msgid.new_message_id(now)
            born = str(now)
            if len(born) == _BORN_DIGITS and len(message_id) == _ID_CHARS:
                # the pairs' constant bytes from the cache, only the time and the id (ASCII) per message
                before, after = self.plain_pairs(producer_group, message.transactional, around)
                ext = b"".join(
                    (head, _BORN_KEY, born.encode("ascii"), before, message_id.encode("ascii"), after, tail)
                )
                return ext, bytes(message.body), message_id
            properties = around[0] + message_id + around[1]
        else:
            message_id = given or msgid.new_message_id(now)  # an empty id is made, as for JSON
            properties = conv.properties_text(message, message_id, producer_group)
        ext = b"".join((head, binary_pair("g", str(now)), BINARY_H, binary_pair("i", properties), tail))
        return ext, bytes(message.body), message_id


# the queue ids an answer names: one dict lookup instead of the plain-decimal check (canonical
# spellings only, so anything else still goes to _plain_int)
_SMALL_INTS: Final[dict[str, int]] = {str(i): i for i in range(-1, 1024)}
# a SendResult from its six field values: common.fastinit.slot_maker (one C call with common/_slots.c
# built, else object.__new__ plus the slot setters), which checks the field list at import
_MAKE_RESULT: Final = slot_maker(
    SendResult,
    ("message_id", "queue", "queue_offset", "transaction_id", "offset_message_id", "recall_handle"),
)


def _plain_int(raw: str) -> int | None:
    """``headers._plain_int``: ``raw`` as an int when it is a plain decimal (ASCII digits, optional
    ``-``, at most 18 digits); None sends the caller to the general parser."""
    if raw.isdecimal() and raw.isascii() and len(raw) <= _DIGITS_MAX:  # no sign (an offset): no slices
        return int(raw)
    digits = raw[1:] if raw[:1] == "-" else raw
    if digits.isdecimal() and digits.isascii() and len(digits) <= _DIGITS_MAX:
        return int(raw)
    return None


def send_result(target: MessageQueue, message_id: str, response: RemotingCommand) -> SendResult:
    """The result of one message sent to ``target`` and answered with ``response``: what
    ``send_results(target, [message_id], response)[0]`` gives, read straight from the answer's fields
    when they are plain (no ``SendMessageResponseHeader``, no list); raises what the code means."""
    code = response.code
    if code == _SUCCESS:
        ext = response.ext_fields
        offset_ids, raw_queue, raw_offset = ext.get("msgId"), ext.get("queueId"), ext.get("queueOffset")
        if offset_ids is not None and raw_queue is not None and raw_offset is not None:
            queue_id = _SMALL_INTS.get(raw_queue)
            if queue_id is None:
                queue_id = _plain_int(raw_queue)
            queue_offset = _plain_int(raw_offset)
            if queue_id is not None and queue_offset is not None:
                queue = (
                    target
                    if queue_id == target.queue_id
                    else MessageQueue(target.topic, queue_id, target.broker_name)
                )
                comma = offset_ids.find(",")
                # SendResult(...) with its six slots set here: a class call runs slot_init's
                # interpreted __init__ (~5k instructions); tests/unit/test_single_send.py
                result: SendResult = _MAKE_RESULT(
                    message_id,
                    queue,
                    queue_offset,
                    ext.get("transactionId"),
                    offset_ids if comma < 0 else offset_ids[:comma],
                    ext.get("recallHandle"),
                )
                return result
    return send_results(target, [message_id], response)[0]


def send_results(target: MessageQueue, ids: list[str], response: RemotingCommand) -> list[SendResult]:
    """The results of a send to ``target`` of messages ``ids``; raises what the response code means."""
    if response.code not in SEND_OK:
        raise error_for_response(response.code, response.remark)
    answer = headers.parse_send_response(response.ext_fields)
    queue = (
        target
        if answer.queue_id == target.queue_id
        else MessageQueue(target.topic, answer.queue_id, target.broker_name)
    )
    if len(ids) == 1:
        offset_id = answer.msg_id.split(",", 1)[0]
        return [
            SendResult(
                ids[0], queue, answer.queue_offset, answer.transaction_id, offset_id, answer.recall_handle
            )
        ]
    if _RESULTS is not None:  # one C call: every result's six slots filled, the offset ids split
        made: list[SendResult] | None = _RESULTS(
            ids, queue, answer.queue_offset, answer.transaction_id, answer.msg_id, answer.recall_handle
        )
        if made is not None:
            return made
    return results_py(
        ids, queue, answer.queue_offset, answer.transaction_id, answer.msg_id, answer.recall_handle
    )


def results_py(
    ids: list[str],
    queue: MessageQueue,
    base: int,
    transaction_id: str | None,
    msg_id: str,
    recall_handle: str | None,
) -> list[SendResult]:
    """A batch's results: ``SendResult(ids[i], queue, base + i, transaction_id, offset_ids[i],
    recall_handle)``, ``offset_ids`` the answer's ``msg_id`` split at commas (None past its last);
    the reference of ``_batchsend.results`` (tests/property/test_batchsend_native.py)."""
    offset_ids = msg_id.split(",")
    known = len(offset_ids)
    # each SendResult(...) with its six slots set here, as the single send's: a class call runs
    # slot_init's interpreted __init__ (~5k instructions a result, a batch's 100 ~0.5M);
    # tests/unit/test_single_send.py holds them equal to the class call's
    results: list[SendResult] = []
    for i in range(len(ids)):
        result: SendResult = _MAKE_RESULT(
            ids[i], queue, base + i, transaction_id, offset_ids[i] if i < known else None, recall_handle
        )
        results.append(result)
    return results


def plain_total_py(messages: Sequence[object], topic: str, body_max: int) -> int:
    """The sum of the body lengths when every message is a plain ``Message`` of ``topic`` (exactly a
    Message; no tags, keys, message group, delivery time or delay level; not transactional; a
    ``bytes`` body of 1..``body_max`` bytes), else -1: the reference of ``_batchsend.plain_total``.
    Such a message passes every check of ``Producer.send_batch``'s loop once the batch's first
    message did (same topic), so a batch of them skips that loop."""
    total = 0
    for item in messages:
        if type(item) is not Message:
            return -1
        # read untyped: compiled, a typed read of a field holding another type (a list of keys, a str
        # body set behind the constructor's back) raises TypeError, where this must answer -1
        m: Any = item
        body = m.body
        if (
            type(m.topic) is not str
            or m.topic != topic
            or type(body) is not bytes
            or not 0 < len(body) <= body_max
            or m.tags is not None
            or type(m.keys) is not tuple
            or m.keys
            or m.message_group is not None
            or m.delivery_timestamp_ms is not None
            or m.delay_level is not None
            or m.transactional is not False
        ):
            return -1
        total += len(body)
    return total


def _load_batchsend() -> Any:
    """The C extension ``client/_batchsend.c`` (built beside the mypyc modules), bound to SendResult
    and Message; None when it is not built, ``TXMQ_PURE=1``, or a class is not laid out as it expects
    (then every batch takes :func:`results_py` and ``send_batch``'s loop)."""
    try:
        module = importlib.import_module("txmq.client._batchsend")
        module.setup(
            SendResult, tuple(f.name for f in dataclasses.fields(SendResult)),
            Message, tuple(f.name for f in dataclasses.fields(Message)),
        )  # fmt: skip
    except (ImportError, TypeError):
        return None
    return module


_BATCHSEND: Final[Any] = _load_batchsend()
_RESULTS: Final[Any] = None if _BATCHSEND is None else _BATCHSEND.results
# plain_total(messages, topic, body_max) -> int (-1: not a plain batch), or None without the extension
PLAIN_TOTAL: Final[Any] = None if _BATCHSEND is None else _BATCHSEND.plain_total
_PLAIN_BATCH: Final[Any] = None if _BATCHSEND is None else _BATCHSEND.plain_batch
# conv.plain_id_tail per producer group (an f-string and an encode per batch otherwise); groups
# without one (None) are not kept, and only the first _ID_TAILS_MAX groups are
_ID_TAILS: Final[dict[str, bytes]] = {}
_ID_TAILS_MAX: Final = 64
_PLAIN_SINGLE: Final[Any] = None if _BATCHSEND is None else getattr(_BATCHSEND, "plain_single", None)
# a transaction's steps in C (None without the extension): transactional_copy(message) -> Message | None
# (_transaction._transactional_py the reference), end_binary(...) -> bytes | None (_remoting._end_binary_py)
TRANSACTIONAL_COPY: Final[Any] = getattr(_BATCHSEND, "transactional_copy", None)
END_BINARY: Final[Any] = getattr(_BATCHSEND, "end_binary", None)
# msgid.offset_of_offset_message_id of an exact str (the reference), in C
OFFSET_ID_OFFSET: Final[Any] = getattr(_BATCHSEND, "offset_id_offset", None)


def plain_batch(
    messages: Sequence[Message], producer_group: str, now_ms: int
) -> tuple[bytes, list[str]] | None:
    """A batch of plain messages without ids (``_batchsend.plain_batch``: no user properties, tags,
    keys, group, delay, delivery time, check immunity or transaction; bytes bodies): its fresh message
    ids and its SEND_BATCH_MESSAGE body, made in one C pass; None (no id taken) for any other batch,
    or without the extension, and the caller makes them as before (``msgid.new_message_ids``, then
    ``_remoting_convert.batch_body``: the reference, tests/property/test_batchsend_native.py)."""
    if _PLAIN_BATCH is None:
        return None
    id_tail = _ID_TAILS.get(producer_group)
    if id_tail is None:
        id_tail = conv.plain_id_tail(producer_group)
        if id_tail is None:
            return None
        if len(_ID_TAILS) < _ID_TAILS_MAX:
            _ID_TAILS[producer_group] = id_tail
    made: tuple[bytes, list[str]] | None = _PLAIN_BATCH(
        messages,
        msgid.id_prefix(now_ms),
        msgid.SEQUENCE,
        id_tail,
        conv.PLAIN_PROPERTIES_MAX,
        EMPTY_PROPERTIES,
    )
    return made
