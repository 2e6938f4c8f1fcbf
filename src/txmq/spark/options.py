"""The source's options (strings, case-insensitive, as Spark passes them) parsed into one value (pure).

See ``docs/spark.md`` for the table. Errors are ``InvalidArgument`` naming the option, raised when the
query is defined rather than on an executor later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from txmq.client._factory import TransportName
from txmq.common import errors, limits, names
from txmq.spark import offsets as off

DEFAULT_GROUP = "txmq-spark-source"
MIN_PARTITIONS_MAX = 10_000  # Spark tasks one read may be cut into by minPartitions


@dataclass(frozen=True, slots=True)
class Bound:
    """Where a read starts or ends: ``earliest``, ``latest``, explicit ``offsets`` or a ``timestamp``."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp"
    offsets: off.Flat = field(default_factory=dict)
    timestamp_ms: int = 0


EARLIEST = Bound("earliest")
LATEST = Bound("latest")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    endpoints: str
    topics: tuple[str, ...]
    transport: TransportName = "remoting"
    tags: str = "*"
    starting: Bound = LATEST
    ending: Bound = LATEST
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    pull_batch_size: int = limits.pull_batch_max
    request_timeout_s: float = 10.0
    arrow: bool = True
    group: str = DEFAULT_GROUP
    min_partitions: int | None = None  # cut the queues' ranges until a read has at least this many tasks
    max_offsets_per_partition: int | None = None  # ... and no task reads more offsets than this


def _bool(raw: Mapping[str, str], key: str, default: bool) -> bool:
    value = raw.get(key)
    if value is None:
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise errors.InvalidArgument(f"option {key} must be true or false, not {value!r}")
    return text == "true"


def _positive_int(raw: Mapping[str, str], key: str, *, upper: int | None = None) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    text = value.strip()
    if not text.isdecimal() or int(text) <= 0:
        raise errors.InvalidArgument(f"option {key} must be a positive integer, not {value!r}")
    if upper is not None and int(text) > upper:
        raise errors.InvalidArgument(f"option {key} must be at most {upper}, not {value!r}")
    return int(text)


def _timestamp(key: str, value: str) -> Bound:
    text = value.strip()
    if not text.isdecimal():
        raise errors.InvalidArgument(f"option {key} must be epoch milliseconds, not {value!r}")
    return Bound("timestamp", timestamp_ms=int(text))


def parse_bound(key: str, value: str, topics: tuple[str, ...]) -> Bound:
    """``earliest`` | ``latest`` | JSON offsets | epoch milliseconds (a timestamp)."""
    text = value.strip()
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return EARLIEST if lowered == "earliest" else LATEST
    if text.isdecimal():
        return _timestamp(key, text)
    if text.startswith("{"):
        try:
            flat = off.flatten(off.from_json(text))
        except errors.InvalidOffset as exc:
            raise errors.InvalidArgument(f"option {key}: {exc.message}") from None
        unknown = sorted({topic for topic, _ in flat} - set(topics))
        if unknown:
            raise errors.InvalidArgument(f"option {key} names topics that are not read: {unknown}")
        return Bound("offsets", offsets=flat)
    raise errors.InvalidArgument(
        f"option {key} must be earliest, latest, JSON offsets or epoch milliseconds, not {value!r}"
    )


def _topics(raw: Mapping[str, str]) -> tuple[str, ...]:
    text = raw.get("topic") or raw.get("topics") or ""
    topics = tuple(sorted({t.strip() for t in text.split(",") if t.strip()}))
    if not topics:
        raise errors.InvalidArgument("option topic is required (one topic or a comma-separated list)")
    for topic in topics:
        names.validate_topic(topic)
    return topics


def _bound(
    raw: Mapping[str, str], offsets_key: str, time_key: str, topics: tuple[str, ...], default: Bound
) -> Bound:
    by_offsets, by_time = raw.get(offsets_key), raw.get(time_key)
    if by_offsets is not None and by_time is not None:
        raise errors.InvalidArgument(f"give either {offsets_key} or {time_key}, not both")
    if by_time is not None:
        return _timestamp(time_key, by_time)
    if by_offsets is not None:
        return parse_bound(offsets_key, by_offsets, topics)
    return default


def parse(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Parse Spark's option map (keys in any case) for a streaming or a batch read."""
    raw = {k.lower(): v for k, v in options.items()}
    endpoints = (raw.get("endpoints") or "").strip()
    if not endpoints:
        raise errors.InvalidArgument(
            "option endpoints is required: the name server (host:9876), "
            "or the gRPC endpoint with transport=grpc"
        )
    transport = raw.get("transport", "remoting").strip().lower()
    if transport not in ("remoting", "grpc"):
        raise errors.InvalidArgument(f"option transport must be remoting or grpc, not {transport!r}")
    topics = _topics(raw)
    tags = (raw.get("tags") or "*").strip() or "*"
    if tags != "*" and not [t for t in tags.split("||") if t.strip()]:
        raise errors.InvalidArgument(f"option tags must be * or tags separated by ||, not {tags!r}")
    starting = _bound(raw, "startingoffsets", "startingtimestamp", topics, LATEST if streaming else EARLIEST)
    if streaming and ("endingoffsets" in raw or "endingtimestamp" in raw):
        raise errors.InvalidArgument("endingOffsets/endingTimestamp are for batch reads only")
    ending = _bound(raw, "endingoffsets", "endingtimestamp", topics, LATEST)
    if ending.kind == "earliest":
        raise errors.InvalidArgument("option endingOffsets cannot be earliest")
    group = (raw.get("group") or DEFAULT_GROUP).strip()
    names.validate_group(group)
    timeout_ms = _positive_int(raw, "requesttimeoutms")
    return SourceOptions(
        endpoints=endpoints,
        topics=topics,
        transport=cast(TransportName, transport),
        tags=tags,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive_int(raw, "maxoffsetspertrigger"),
        fail_on_data_loss=_bool(raw, "failondataloss", True),
        pull_batch_size=_positive_int(raw, "pullbatchsize", upper=limits.pull_batch_max)
        or limits.pull_batch_max,
        request_timeout_s=(timeout_ms / 1000) if timeout_ms else 10.0,
        arrow=_bool(raw, "arrow", True),
        group=group,
        min_partitions=_positive_int(raw, "minpartitions", upper=MIN_PARTITIONS_MAX),
        max_offsets_per_partition=_positive_int(raw, "maxoffsetsperpartition"),
    )
