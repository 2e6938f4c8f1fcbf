"""System topic and group names, and validation of user-chosen names (RocketMQ TopicValidator rules)."""

from __future__ import annotations

from typing import Final

from txmq.common import errors, limits

HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
DEFAULT_TOPIC: Final = "TBW102"
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"  # txmq stores arbitrary-time delays here
SPARK_COMMIT_TOPIC: Final = "RMQ_SYS_TXMQ_SPARK_COMMITS"
RETRY_PREFIX: Final = "%RETRY%"
DLQ_PREFIX: Final = "%DLQ%"

SYSTEM_TOPICS: Final = frozenset(
    {
        HALF_TOPIC,
        OP_HALF_TOPIC,
        CHECK_MAX_TIME_TOPIC,
        SCHEDULE_TOPIC,
        DEFAULT_TOPIC,
        TIMER_TOPIC,
        SPARK_COMMIT_TOPIC,
    }
)


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(("rmq_sys_", "RMQ_SYS_"))


SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # RocketMQ's MixAll.CID_RMQ_SYS_PREFIX


def is_system_group(group: str) -> bool:
    return group.startswith(SYSTEM_GROUP_PREFIX)


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


_VALID: set[tuple[str, bool]] = set()  # names that passed, so the send path checks a set, not a regex
_VALID_MAX = 100_000


def validate_topic(topic: str, *, allow_system: bool = False) -> None:
    """Raise ``InvalidTopic`` unless ``topic`` is a legal name a user may write to."""
    if (topic, allow_system) in _VALID:
        return
    _validate_topic(topic, allow_system)
    if len(_VALID) < _VALID_MAX:
        _VALID.add((topic, allow_system))


def _validate_topic(topic: str, allow_system: bool) -> None:
    if not topic:
        raise errors.InvalidTopic("the topic name is empty")
    limit = limits.retry_topic_name_len_max if is_retry_or_dlq(topic) else limits.topic_name_len_max
    if len(topic) > limit:
        raise errors.InvalidTopic(f"topic name is {len(topic)} characters, over the limit of {limit}")
    if not limits.name_pattern.match(topic):
        raise errors.InvalidTopic(f"topic name {topic[:64]!r} has characters outside [%|a-zA-Z0-9_-]")
    if not allow_system and is_system_topic(topic):
        raise errors.InvalidTopic(f"{topic} is a system topic and cannot be used by clients")


def validate_group(group: str) -> None:
    if not group:
        raise errors.InvalidGroup("the group name is empty")
    if len(group) > limits.group_name_len_max:
        raise errors.InvalidGroup(
            f"group name is {len(group)} characters, over the limit of {limits.group_name_len_max}"
        )
    if not limits.name_pattern.match(group) or "%" in group:
        raise errors.InvalidGroup(f"group name {group[:64]!r} has characters outside [|a-zA-Z0-9_-]")
