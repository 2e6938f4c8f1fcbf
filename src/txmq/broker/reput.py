"""Move a stored message from an internal topic (schedule, timer, half) to its real topic.

The original properties travel along; the routing properties that only made sense in the internal topic
are dropped, so the delivered copy looks exactly like a message sent straight to its topic. The delivery
timestamp stays: consumers see when a delayed message was due.
"""

from __future__ import annotations

from typing import Final

from txmq.broker.filtering import tag_hash
from txmq.common import limits
from txmq.common import properties as props
from txmq.common.fastinit import tuple_maker
from txmq.common.message import SysFlag
from txmq.storage.api import PutRequest, RecordFields, StoredRecord, StoredTuple

# Final: compiled code reads these from C statics, not the module's dict
_ROUTING_KEYS: Final = (props.REAL_TOPIC, props.REAL_QUEUE_ID, props.DELAY, props.TRAN_MSG)
_SEP: Final = props.NAME_VALUE_SEPARATOR.encode()
_END: Final = props.PROPERTY_SEPARATOR.encode()
# b"\x02NAME\x01": where a pair starts in b"\x02" + canonical properties (nothing else can match)
_ROUTING_MARKERS = tuple((key, _END + key.encode() + _SEP) for key in _ROUTING_KEYS)
_TXID_MARKER: Final = _END + props.TRANSACTION_ID.encode() + _SEP
_TXID_PAIR: Final = props.TRANSACTION_ID.encode() + _SEP
_REAL_TOPIC_PAIR: Final = props.REAL_TOPIC.encode() + _SEP  # how a half's routing tail starts
# the routing pairs a half's properties end with (SendService._half_properties), around their values
_HALF_TAIL: Final = (f"{props.REAL_TOPIC}\x01", f"\x02{props.REAL_QUEUE_ID}\x01", f"\x02{props.TRAN_MSG}\x01")
# to_real_topic's sys_flag for a commit (the flag's commit bits are cleared; the offset stays)
_COMMITTED_SYS_FLAG: Final = int(SysFlag.TRANSACTION_COMMIT & ~SysFlag.TRANSACTION_ROLLBACK)


def real_destination(decoded: dict[str, str], record: StoredRecord) -> tuple[str, int]:
    return _destination(decoded, record.topic, record.queue_id)


def _destination(decoded: dict[str, str], topic: str, queue_id: int) -> tuple[str, int]:
    queue = decoded.get(props.REAL_QUEUE_ID, "")
    return decoded.get(props.REAL_TOPIC) or topic, int(queue) if queue.lstrip("-").isdecimal() else queue_id


def to_real_topic(
    record: StoredRecord,
    decoded: dict[str, str],
    *,
    queue_id: int | None = None,
    sys_flag: int = 0,
    keep_delay: bool = False,
    extra: dict[str, str] | None = None,
    index_keys: tuple[str, ...] | None = None,
) -> PutRequest:
    """The record as it should appear in its real topic (``index_keys``: as ``PutRequest.index_keys``)."""
    topic, real_queue = real_destination(decoded, record)
    properties = dict(decoded)
    for key in _ROUTING_KEYS:
        if not (keep_delay and key == props.DELAY):
            properties.pop(key, None)
    if extra:
        properties.update(extra)
    return PutRequest(
        topic=topic,
        queue_id=real_queue if queue_id is None else queue_id,
        body=record.body,
        properties=props.encode(properties),
        tags_code=tag_hash(properties.get(props.TAGS)),
        flag=record.flag,
        sys_flag=sys_flag & ~SysFlag.TRANSACTION_ROLLBACK,
        born_timestamp_ms=record.born_timestamp_ms,
        born_host=record.born_host,
        reconsume_times=record.reconsume_times,
        prepared_transaction_offset=record.physical_offset if sys_flag else 0,
        index_keys=index_keys,
    )


def committed_fields(
    half: StoredTuple,
    decoded: dict[str, str],
    transaction_id: str,
    index_keys: tuple[str, ...],
    cut: int = -1,
) -> tuple[str, RecordFields]:
    """The committed message of a half (not delayed) as the store's record fields: what
    ``to_real_topic(half, decoded, sys_flag=TRANSACTION_COMMIT, extra={TRANSACTION_ID: transaction_id},
    index_keys=index_keys)`` gives once validated, without the property dict's copy and re-encoding
    when the half's stored properties are canonical (:func:`spliced_properties`).

    ``cut`` (``SendService.half_lane_append`` knows it, ``TransactionService.half_stored`` keeps it):
    the stored properties are canonical, hold no delay and no transaction id, and end with the
    routing pairs (``REAL_TOPIC``, ``REAL_QUEUE_ID``, ``TRAN_MSG``), which start at ``cut``; the
    properties then are ``data[:cut]`` and the transaction id's pair, the bytes :func:`spliced_properties`
    cuts (it re-proves all of that first); -1: unknown, it does. A cut that does not start a
    ``REAL_TOPIC`` pair, or a half with a delay or a transaction id, takes that way too."""
    topic, queue_id = _destination(decoded, half.topic, half.queue_id)
    data = half.properties
    if (
        0 <= cut < len(data)
        and len(decoded) < limits.property_count_max
        and (cut == 0 or data[cut - 1] == 2)
        and data[cut : cut + len(_REAL_TOPIC_PAIR)] == _REAL_TOPIC_PAIR  # startswith(pair, cut)
        and props.DELAY not in decoded
        and props.TRANSACTION_ID not in decoded
    ):
        properties: bytes | None = data[:cut] + _TXID_PAIR + transaction_id.encode() + _END
    else:
        properties = spliced_properties(data, decoded, transaction_id)
    if properties is None:
        copied = dict(decoded)
        for key in _ROUTING_KEYS:
            copied.pop(key, None)
        copied[props.TRANSACTION_ID] = transaction_id
        properties = props.encode(copied)
    fields: RecordFields = _MAKE_RECORD_FIELDS(
        topic.encode(), queue_id, half.body, properties, tag_hash(decoded.get(props.TAGS)), half.flag,
        _COMMITTED_SYS_FLAG, half.born_timestamp_ms, half.born_host.encode(), half.reconsume_times,
        half.physical_offset, index_keys,
    )  # fmt: skip
    return topic, fields


def spliced_properties(data: bytes, decoded: dict[str, str], transaction_id: str) -> bytes | None:
    """``props.encode`` of ``decoded`` without the routing keys and with ``TRANSACTION_ID`` set to
    ``transaction_id``, cut and spliced from ``data`` (the stored properties ``decoded`` came from), or
    None when ``data`` is not what ``props.encode(decoded)`` gives (then only the dict way is exact).

    ``data`` is that encoding iff it ends with a pair's end, holds one name/value separator per pair,
    and its pairs are as many as ``decoded``'s keys, none empty: every pair then is ``name\x01value\x02``
    with a distinct, non-empty name, in ``decoded``'s order (and below the property count limit, so the
    pair added cannot be the one over it: ``props.encode`` would refuse it). A pair is found by
    ``\x02name\x01`` in ``\x02 + data`` (values hold no separator): dropping it keeps the others'
    order, and setting an existing name's value keeps its place, as ``dict.pop`` and ``dict.update`` do."""
    count = data.count(_END)
    if (
        count != len(decoded)
        or count >= limits.property_count_max
        or data.count(_SEP) != count
        or (count and data[-1] != 2)
        or "" in decoded
    ):
        return None
    value = transaction_id.encode()
    if props.DELAY not in decoded and props.TRANSACTION_ID not in decoded:
        # a half as the send path stores it: its routing pairs last, in this order (one comparison)
        topic = decoded.get(props.REAL_TOPIC)
        queue = decoded.get(props.REAL_QUEUE_ID)
        flag = decoded.get(props.TRAN_MSG)
        if topic is not None and queue is not None and flag is not None:
            tail = f"{_HALF_TAIL[0]}{topic}{_HALF_TAIL[1]}{queue}{_HALF_TAIL[2]}{flag}\x02".encode()
            size = len(data) - len(tail)
            if size >= 0 and (size == 0 or data[size - 1] == 2) and data.endswith(tail):
                return data[:size] + _TXID_PAIR + value + _END
    text = _END + data
    for key, marker in _ROUTING_MARKERS:
        if key in decoded:
            at = text.find(marker)
            text = text[:at] + text[text.index(_END, at + 1) :]
    if props.TRANSACTION_ID in decoded:
        at = text.find(_TXID_MARKER) + len(_TXID_MARKER)
        text = text[:at] + value + text[text.index(_END, at) :]
    else:
        text += _TXID_PAIR + value + _END
    return text[1:]


# NamedTuples made per message by one C call each (fastinit.tuple_maker: tuple.__new__'s object without
# the class's interpreted __new__ and without an argument tuple); Final: compiled code reads C statics
_MAKE_RECORD_FIELDS: Final = tuple_maker(RecordFields)
