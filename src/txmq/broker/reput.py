"""Move a stored message from an internal topic (schedule, timer, half) to its real topic.

The original properties travel along; the routing properties that only made sense in the internal topic
are dropped, so the delivered copy looks exactly like a message sent straight to its topic. The delivery
timestamp stays: consumers see when a delayed message was due.
"""

from __future__ import annotations

from txmq.broker.filtering import tag_hash
from txmq.common import properties as props
from txmq.common.message import SysFlag
from txmq.storage.api import PutRequest, StoredRecord

_ROUTING_KEYS = (props.REAL_TOPIC, props.REAL_QUEUE_ID, props.DELAY, props.TRAN_MSG)


def real_destination(decoded: dict[str, str], record: StoredRecord) -> tuple[str, int]:
    topic = decoded.get(props.REAL_TOPIC) or record.topic
    queue = decoded.get(props.REAL_QUEUE_ID, "")
    return topic, int(queue) if queue.lstrip("-").isdecimal() else record.queue_id


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
