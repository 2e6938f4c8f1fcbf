"""4.x consumer retries (CONSUMER_SEND_MSG_BACK): a failed message goes back through ``%RETRY%<group>``.

The copy is delayed by a delay level: the consumer's choice, or ``3 + reconsumeTimes`` when it leaves the
choice to the broker (level 3 is 10 s with the default levels, then 30 s, 1 m ...). Past
``max_reconsume_times`` the copy goes to ``%DLQ%<group>`` instead, where nobody consumes it by default.
The copy keeps the original's body and properties, plus where it came from (``RETRY_TOPIC``,
``ORIGIN_MESSAGE_ID``) and how often it was consumed (``RECONSUME_TIME``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from txmq.broker import delay_levels as levels_mod
from txmq.broker.records import message_id_of
from txmq.broker.reput import to_real_topic
from txmq.common import names
from txmq.common import properties as props
from txmq.storage.api import AppendResult, PutRequest

if TYPE_CHECKING:
    from txmq.broker.broker import Broker

log = logging.getLogger(__name__)

MAX_RECONSUME_TIMES_DEFAULT = 16
FIRST_RETRY_LEVEL = 3


@dataclasses.dataclass(frozen=True, slots=True)
class SendBackResult:
    topic: str  # %RETRY%<group> or %DLQ%<group>
    delay_level: int  # 0 for the DLQ
    reconsume_times: int
    appended: AppendResult


async def send_back(
    broker: Broker,
    group: str,
    commit_log_offset: int,
    delay_level: int,
    max_reconsume_times: int | None = None,
) -> SendBackResult:
    """Re-publish the message stored at ``commit_log_offset`` for ``group``'s next attempt (or its DLQ)."""
    names.validate_group(group)
    record = broker.store.read(commit_log_offset)
    decoded = props.decode(record.properties)
    times = int(decoded.get(props.RECONSUME_TIME, record.reconsume_times) or 0) + 1
    limit = MAX_RECONSUME_TIMES_DEFAULT if max_reconsume_times is None else max_reconsume_times
    origin_topic = decoded.get(props.RETRY_TOPIC) or record.topic
    origin_id = decoded.get(props.ORIGIN_MESSAGE_ID) or message_id_of(record, decoded)
    extra = {props.RECONSUME_TIME: str(times), props.ORIGIN_MESSAGE_ID: origin_id}
    if delay_level < 0 or times > limit:
        dlq = names.dlq_topic(group)
        broker.topics.resolve(dlq, for_write=True)
        extra |= {props.DLQ_ORIGIN_TOPIC: origin_topic, props.DLQ_ORIGIN_MESSAGE_ID: origin_id}
        routed = {**decoded, props.REAL_TOPIC: dlq, props.REAL_QUEUE_ID: "0"}
        routed.pop(props.RETRY_TOPIC, None)
        request = dataclasses.replace(to_real_topic(record, routed, extra=extra), reconsume_times=times)
        appended = await broker.store.put(request)
        log.info("message %s of group %s moved to %s after %d attempts", origin_id, group, dlq, times)
        return SendBackResult(dlq, 0, times, appended)
    retry = names.retry_topic(group)
    broker.topics.resolve(retry, for_write=True)
    level = levels_mod.clamp_level(delay_level or FIRST_RETRY_LEVEL + times - 1, broker.delay_levels)
    extra[props.RETRY_TOPIC] = origin_topic
    routed = {**decoded, props.REAL_TOPIC: retry, props.REAL_QUEUE_ID: "0"}
    request = dataclasses.replace(to_real_topic(record, routed, extra=extra), reconsume_times=times)
    appended = await broker.store.put(_delayed(request, level, broker))
    return SendBackResult(retry, level, times, appended)


def _delayed(request: PutRequest, level: int, broker: Broker) -> PutRequest:
    """The copy parked in the schedule topic until its delay level elapses (the delay service moves it)."""
    now = broker.clock.now_ms()
    deliver = levels_mod.deliver_at_ms(level, now, broker.delay_levels)
    properties = props.decode(request.properties)
    properties |= {
        props.REAL_TOPIC: request.topic,
        props.REAL_QUEUE_ID: str(request.queue_id),
        props.TIMER_DELIVER_MS: str(deliver),
        props.DELAY: str(level),
    }
    return dataclasses.replace(
        request, topic=names.SCHEDULE_TOPIC, queue_id=level - 1, tags_code=deliver,
        properties=props.encode(properties),
    )  # fmt: skip
