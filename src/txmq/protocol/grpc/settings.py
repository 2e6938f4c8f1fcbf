"""Telemetry settings replies: the client's settings merged with the values the server decides.

Clients copy some server values blindly: without ``publishing.max_body_size`` every send fails with
"max size=0 bytes"; a PushConsumer takes its FIFO mode, long-polling time and retry back-off only from
this reply (protocol.md §2.5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txmq.common import limits
from txmq.protocol.grpc import pb
from txmq.protocol.grpc.convert import set_duration

PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_MS = (10, 1_000)  # initial, max; multiplier 2 (the Apache proxy's defaults)
# RocketMQ's default redelivery schedule: 1s 5s 10s 30s 1m 2m 3m ... 10m 20m 30m 1h 2h
CONSUMER_BACKOFF_MS = limits.retry_backoff_ms_default
RECEIVE_BATCH_SIZE = 32
LONG_POLLING_MS = 20_000


def _exponential(policy: Any, max_attempts: int, initial_ms: int, max_ms: int) -> None:
    policy.max_attempts = max_attempts
    set_duration(policy.exponential_backoff.initial, initial_ms)
    set_duration(policy.exponential_backoff.max, max_ms)
    policy.exponential_backoff.multiplier = 2.0


def producer_reply(client: Any) -> Any:
    """Settings for a producer: body limit, message-type validation, send retry policy."""
    reply = pb.Settings()
    reply.CopyFrom(client)
    reply.publishing.max_body_size = limits.body_bytes_max
    reply.publishing.validate_message_type = True
    _exponential(reply.backoff_policy, PRODUCER_MAX_ATTEMPTS, *PRODUCER_BACKOFF_MS)
    reply.metric.on = False
    return reply


def consumer_reply(client: Any, *, max_attempts: int, fifo: bool, backoff_ms: Sequence[int] = ()) -> Any:
    """Settings for a push or simple consumer: the group's delivery policy.

    The back-off is always a customized schedule of whole seconds: the Python PushConsumer nacks with
    ``invisible_duration.seconds = <delay>``, and an exponential policy gives it a float there, which
    protobuf rejects (the nack then never reaches the broker). ``backoff_ms`` empty: RocketMQ's schedule.
    """
    reply = pb.Settings()
    reply.CopyFrom(client)
    reply.backoff_policy.Clear()
    reply.backoff_policy.max_attempts = max_attempts
    for step in backoff_ms or CONSUMER_BACKOFF_MS:
        set_duration(reply.backoff_policy.customized_backoff.next.add(), max(1_000, step // 1000 * 1000))
    sub = reply.subscription
    sub.fifo = fifo
    sub.receive_batch_size = RECEIVE_BATCH_SIZE
    if sub.long_polling_timeout.seconds == 0 and sub.long_polling_timeout.nanos == 0:
        set_duration(sub.long_polling_timeout, LONG_POLLING_MS)
    reply.metric.on = False
    return reply


def subscribed_topics(settings: Any) -> list[str]:
    return [entry.topic.name for entry in settings.subscription.subscriptions]


def published_topics(settings: Any) -> list[str]:
    return [topic.name for topic in settings.publishing.topics]
