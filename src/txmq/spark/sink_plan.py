"""The exactly-once sink's decisions, as pure functions (no Spark, no sockets): unit-tested without a JVM.

How a streaming batch becomes visible exactly once (the I/O is in :mod:`txmq.spark.sink_log`):

1. every executor task attempt draws a fresh random **token** and sends each row as a **half message**
   (invisible) tagged with ``(sink id, epoch, token)``; the epoch is Spark's batch id (a batch write uses
   ``job-<uuid>``). The task returns its token and its halves' transaction ids to the driver;
2. the driver's ``commit(messages, batchId)`` reads the sink's **marker log** (queue 0 of the topic
   ``TXMQ_SINK_<sink id>``, one JSON marker per committed epoch) and plans (:func:`plan_commit`): an epoch
   already recorded is a **replay** and its halves are rolled back; otherwise it appends the marker
   ``{epoch, tokens}`` **first** (the decision point) and then commits every half;
3. anything left pending by a crash is settled by check-back (:func:`verdict_for`): a half whose epoch has
   a marker is committed iff its token is in it (the failed task attempts and replays are not) and it is
   the try of its row that the task reported (below); a streaming half whose batch is older than the
   newest marker, without a marker of its own, is rolled back; anything else stays UNKNOWN, because its
   batch may still be committing.

Re-sent rows: a half whose send failed ambiguously (a timeout, a connection lost after the request was
written) may be stored although the task never learned its transaction id. It carries the attempt's
token, so the token alone would let check-back commit it *and* the re-send: a duplicate. So every half
also carries its row's sequence number in the attempt (``TXMQ_SINK_SEQ``) and, when re-sent, the try
number (``TXMQ_SINK_TRY``, absent on the first try); the task reports ``{seq: try}`` for its re-sent rows
and the marker records it per token: only the reported try of a row commits, every other try rolls back.

The crash windows, each converging by check-back: executors sent halves and the driver died before the
marker (no marker: UNKNOWN until the restarted query re-runs the batch and records it with *new* tokens,
then ROLLBACK); the marker was appended but only some halves were ended (COMMIT for the rest); a replayed
batch's fresh halves the driver could not roll back (their token is not in the marker: ROLLBACK).
The marker must come before any COMMIT: committing first and crashing before the marker would let the
re-run deliver the committed rows twice. Spark commits batches in order, so markers' batch ids grow.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from txmq.common import errors, limits
from txmq.common.message import Message

SINK_PROPERTY = "TXMQ_SINK"
EPOCH_PROPERTY = "TXMQ_SINK_EPOCH"
TOKEN_PROPERTY = "TXMQ_SINK_TOKEN"
PARTITION_PROPERTY = "TXMQ_SINK_PARTITION"
SEQ_PROPERTY = "TXMQ_SINK_SEQ"
TRY_PROPERTY = "TXMQ_SINK_TRY"
MARKER_TOPIC_PREFIX = "TXMQ_SINK_"
GROUP_PREFIX = "txmq-sink-"
JOB_PREFIX = "job-"

_PLAIN_ID = re.compile(r"^[A-Za-z0-9_-]+$")


class Verdict(enum.Enum):
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


class CommitPlan(enum.Enum):
    RECORD_AND_COMMIT = "RECORD_AND_COMMIT"  # append the marker, then commit every half
    ROLLBACK_REPLAY = "ROLLBACK_REPLAY"  # this epoch is already recorded: roll the new halves back
    NOTHING = "NOTHING"  # no half was sent: no marker either


@dataclass(frozen=True, slots=True)
class HalfTag:
    """Which sink, epoch and task attempt sent a half message (read back from its properties); ``seq`` and
    ``attempt`` say which row of the attempt and which try of its send (``seq`` is ``None`` on halves of
    sinks older than the re-send rule: the token alone decides for them)."""

    sink_id: str
    epoch: str
    token: str
    seq: int | None = None
    attempt: int = 0

    @property
    def batch_id(self) -> int | None:
        """Spark's batch id for a streaming epoch; ``None`` for a batch job's epoch."""
        return int(self.epoch) if self.epoch.isdecimal() else None

    def properties(self, partition: int) -> dict[str, str]:
        return {
            SINK_PROPERTY: self.sink_id,
            EPOCH_PROPERTY: self.epoch,
            TOKEN_PROPERTY: self.token,
            PARTITION_PROPERTY: str(partition),
        }


def row_properties(seq: int, attempt: int) -> dict[str, str]:
    """The per-row part of a half's tag: its sequence number in the attempt and, when re-sent, the try."""
    if attempt == 0:
        return {SEQ_PROPERTY: str(seq)}
    return {SEQ_PROPERTY: str(seq), TRY_PROPERTY: str(attempt)}


def tag_of(properties: Mapping[str, str]) -> HalfTag | None:
    """The tag of a half message, or ``None`` when it was not sent by a txmq sink (or is malformed)."""
    sink, epoch, token = (properties.get(k) for k in (SINK_PROPERTY, EPOCH_PROPERTY, TOKEN_PROPERTY))
    if not sink or not epoch or not token:
        return None
    seq_text, try_text = properties.get(SEQ_PROPERTY), properties.get(TRY_PROPERTY, "0")
    if (seq_text is not None and not seq_text.isdecimal()) or not try_text.isdecimal():
        return None
    return HalfTag(sink, epoch, token, int(seq_text) if seq_text is not None else None, int(try_text))


@dataclass(frozen=True, slots=True)
class Marker:
    """The durable record that an epoch was committed with exactly these task attempts."""

    sink_id: str
    epoch: str
    tokens: frozenset[str]
    halves: int = 0
    committed_at_ms: int = 0
    # token -> {row seq -> the try that the task reported}, only for re-sent rows (usually empty)
    resent: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    def chosen_try(self, token: str, seq: int) -> int:
        """Which try of row ``seq`` of attempt ``token`` is the one to commit (0 unless it was re-sent)."""
        rows = self.resent.get(token)
        return rows.get(seq, 0) if rows is not None else 0

    def encode(self) -> bytes:
        data: dict[str, Any] = {
            "sink": self.sink_id,
            "epoch": self.epoch,
            "tokens": sorted(self.tokens),
            "halves": self.halves,
            "committed_at_ms": self.committed_at_ms,
        }
        if self.resent:
            data["resent"] = {
                token: {str(seq): attempt for seq, attempt in sorted(rows.items())}
                for token, rows in sorted(self.resent.items())
                if rows
            }
        return json.dumps(data, separators=(",", ":")).encode()

    @staticmethod
    def decode(body: bytes) -> Marker:
        try:
            data = json.loads(body)
            return Marker(
                sink_id=str(data["sink"]),
                epoch=str(data["epoch"]),
                tokens=frozenset(str(t) for t in data["tokens"]),
                halves=int(data.get("halves", 0)),
                committed_at_ms=int(data.get("committed_at_ms", 0)),
                resent={
                    str(token): {int(seq): int(attempt) for seq, attempt in dict(rows).items()}
                    for token, rows in dict(data.get("resent", {})).items()
                },
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.ProtocolError(f"a sink marker is not readable: {exc}") from None


@dataclass(slots=True)
class SinkRecord:
    """What the marker log says: each recorded epoch, and the newest streaming batch id."""

    markers: dict[str, Marker] = field(default_factory=dict)
    latest_batch: int | None = None

    def add(self, marker: Marker) -> None:
        self.markers.setdefault(marker.epoch, marker)  # a retried append repeats the same marker
        if marker.epoch.isdecimal():
            batch = int(marker.epoch)
            self.latest_batch = batch if self.latest_batch is None else max(self.latest_batch, batch)

    @staticmethod
    def of(markers: Iterable[Marker]) -> SinkRecord:
        record = SinkRecord()
        for marker in markers:
            record.add(marker)
        return record


def plan_commit(epoch: str, record: SinkRecord, halves: int) -> CommitPlan:
    """What the driver's commit of ``epoch`` does, given the marker log read just before."""
    if epoch in record.markers:
        return CommitPlan.ROLLBACK_REPLAY
    if epoch.isdecimal() and record.latest_batch is not None and int(epoch) <= record.latest_batch:
        return CommitPlan.ROLLBACK_REPLAY  # an older batch re-run after a newer one was recorded
    if halves == 0:
        return CommitPlan.NOTHING
    return CommitPlan.RECORD_AND_COMMIT


def verdict_for(tag: HalfTag, record: SinkRecord) -> Verdict:
    """Check-back's answer for a half message of this sink (see the module docstring)."""
    marker = record.markers.get(tag.epoch)
    if marker is not None:
        if tag.token not in marker.tokens:
            return Verdict.ROLLBACK
        if tag.seq is not None and tag.attempt != marker.chosen_try(tag.token, tag.seq):
            return Verdict.ROLLBACK  # a try of a re-sent row that the task did not report
        return Verdict.COMMIT
    batch = tag.batch_id
    if batch is not None and record.latest_batch is not None and batch < record.latest_batch:
        return Verdict.ROLLBACK  # the query moved on: this batch was recorded empty or its attempt died
    return Verdict.UNKNOWN


def abort_verdict(tag: HalfTag, record: SinkRecord) -> Verdict:
    """``abort`` comes from the driver that owns the epoch, so no marker can appear later: roll back
    unless the marker is already there (a commit that failed after recording must still complete)."""
    verdict = verdict_for(tag, record)
    return Verdict.ROLLBACK if verdict is Verdict.UNKNOWN else verdict


# ---- names -------------------------------------------------------------------------------------------
def sink_key(sink_id: str) -> str:
    """A name-safe form of the sink id: itself when short and plain, else a stable hash."""
    if not sink_id:
        raise errors.InvalidArgument("the sink id is empty")
    if len(sink_id) <= limits.spark_sink_id_len_max and _PLAIN_ID.match(sink_id):
        return sink_id
    return "h" + hashlib.sha256(sink_id.encode()).hexdigest()[:24]


def marker_topic(sink_id: str) -> str:
    return MARKER_TOPIC_PREFIX + sink_key(sink_id)


def producer_group(sink_id: str) -> str:
    return GROUP_PREFIX + sink_key(sink_id)


def default_sink_id(checkpoint_location: str) -> str:
    """One sink per checkpoint: Spark's batch ids restart with a new checkpoint, so must the record."""
    return "cp" + hashlib.sha256(checkpoint_location.rstrip("/").encode()).hexdigest()[:20]


# ---- options -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SinkOptions:
    """The writer's options (Spark passes them lower-cased, all strings)."""

    endpoints: str
    topic: str | None
    sink_id: str
    check_immunity_s: int | None = None

    @property
    def group(self) -> str:
        return producer_group(self.sink_id)

    @property
    def marker_topic(self) -> str:
        return marker_topic(self.sink_id)


def parse_sink_options(options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
    """Validate the writer's options (batch writes share the sink id ``batch`` unless given one)."""
    lower = {k.lower(): v for k, v in options.items()}
    endpoints = lower.get("endpoints", "").strip()
    if not endpoints:
        raise errors.InvalidArgument("the txmq sink needs option endpoints (the name server, host:9876)")
    sink_id = lower.get("sinkid", "").strip()
    if not sink_id:
        checkpoint = lower.get("checkpointlocation", "").strip()
        if streaming and not checkpoint:
            raise errors.InvalidArgument(
                "a streaming txmq sink needs option sinkId or option checkpointLocation on writeStream"
            )
        sink_id = default_sink_id(checkpoint) if streaming else "batch"
    # a batch's halves stay pending while it runs; without immunity the broker would check every one of
    # them once the batch outlives the transaction timeout (6 s by default)
    default_immunity = str(limits.spark_sink_check_immunity_s_default)
    immunity = lower.get("checkimmunityseconds", "").strip() or default_immunity
    if not immunity.isdecimal():
        raise errors.InvalidArgument(f"checkImmunitySeconds must be a whole number, not {immunity!r}")
    topic = lower.get("topic", "").strip() or None
    return SinkOptions(endpoints, topic, sink_id, int(immunity))


# ---- rows ------------------------------------------------------------------------------------------
SINK_COLUMNS = ("body", "topic", "tags", "keys", "properties", "message_group")


def check_columns(columns: Sequence[str], options: SinkOptions) -> None:
    """Fail at planning time, not in the middle of a task: ``body`` is required, a topic must come from
    the option or a column, and unknown columns are refused (a typo would silently drop data)."""
    if "body" not in columns:
        raise errors.InvalidArgument(f"the txmq sink needs a column body; the DataFrame has {list(columns)}")
    if options.topic is None and "topic" not in columns:
        raise errors.InvalidArgument("the txmq sink needs option topic or a column topic")
    unknown = [c for c in columns if c not in SINK_COLUMNS]
    if unknown:
        raise errors.InvalidArgument(
            f"the txmq sink does not know columns {unknown}; it takes {SINK_COLUMNS}"
        )


def message_of(row: Mapping[str, Any], default_topic: str | None) -> Message:
    """One row as a message (the option ``topic`` wins over the column, as in Spark's Kafka sink)."""
    body = row.get("body")
    if isinstance(body, str):
        body = body.encode()
    elif isinstance(body, bytearray | memoryview):
        body = bytes(body)
    if not isinstance(body, bytes) or not body:
        raise errors.MessageBodyEmpty(
            f"a row's body is {type(body).__name__} {body!r:.40}; it must be non-empty"
        )
    topic = default_topic or row.get("topic")
    if not topic:
        raise errors.InvalidTopic("a row has no topic (and no option topic was given)")
    keys = row.get("keys")
    if isinstance(keys, str):
        key_tuple: tuple[str, ...] = tuple(k for k in keys.split(" ") if k)
    elif keys:
        key_tuple = tuple(str(k) for k in keys)
    else:
        key_tuple = ()
    properties = row.get("properties") or {}
    return Message(
        topic=str(topic), body=body, tags=row.get("tags") or None, keys=key_tuple,
        properties={str(k): str(v) for k, v in dict(properties).items()},
        message_group=row.get("message_group") or None,
    )  # fmt: skip
