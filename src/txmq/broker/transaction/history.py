"""The per-message history of a transaction: events, their byte encoding, and folding them into a state.

Every check and decision is recorded (DESIGN.md §3; pain points #12, #14, #17), so `txmq tx show ID` can
print exactly what happened and the check service can rebuild its state at start by folding the events
it stored (for example as bodies of records in an op/audit topic). Pure: no I/O, no clock.

Recording rules the service follows, which :func:`fold` relies on:

* ``CHECK_SENT`` is recorded only once the check was handed to a live producer's stream (a check that
  could not be delivered is not an event: pain points #6, #14).
* ``DECISION`` is recorded for every COMMIT/ROLLBACK that was *accepted*; a rejected one is recorded as
  ``CONFLICT``, a duplicate may be recorded as ``DECISION`` again (folding is idempotent).
* ``CHECK_ANSWER`` records what a producer answered (UNKNOWN included); it never changes the state by
  itself: an accepted COMMIT/ROLLBACK answer is followed by a ``DECISION`` event with source CHECK.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from txmq.common import errors
from txmq.common.fastinit import slot_init, slot_maker

from .model import Decision, DecisionSource, TxnState, apply_decision

ENCODING_VERSION: Final = 1
# a str as a JSON string literal, escaped as json.dumps(..., ensure_ascii=False) escapes it
_quote: Final = json.encoder.encode_basestring
_E = TypeVar("_E", bound=enum.Enum)


class EventKind(enum.Enum):
    HALF_STORED = "HALF_STORED"
    CHECK_SENT = "CHECK_SENT"
    CHECK_ANSWER = "CHECK_ANSWER"
    DECISION = "DECISION"
    CONFLICT = "CONFLICT"
    DISCARDED = "DISCARDED"
    RESUMED = "RESUMED"


@slot_init  # one is built per decision
@dataclass(frozen=True, slots=True)
class TxnEvent:
    """One line of a transaction's history. ``at_ms`` is always broker time."""

    kind: EventKind
    transaction_id: str
    at_ms: int
    source: DecisionSource | None = None
    producer_client_id: str | None = None
    decision: Decision | None = None
    detail: str = ""

    def encode(self) -> bytes:
        """Compact JSON, one object; stable key names (they are stored): ``{"v", "kind", "txid", "at"}``
        then ``source``, ``client``, ``decision``, ``detail`` when set, as ``json.dumps(doc,
        separators=(",", ":"), ensure_ascii=False)`` writes it, built as one string (once per decision:
        ~3x cheaper than the encoder; enum values are plain names, the free texts are JSON-escaped)."""
        return encode_event(
            self.kind, self.transaction_id, self.at_ms, self.source, self.producer_client_id, self.decision,
            self.detail,
        )  # fmt: skip

    @staticmethod
    def decode(data: bytes) -> TxnEvent:
        """Inverse of :meth:`encode`; raises ``CorruptRecord`` naming what is wrong, never anything else."""
        try:
            doc = json.loads(data.decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise errors.CorruptRecord(f"transaction event is not UTF-8 JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise errors.CorruptRecord("transaction event is not a JSON object")
        if doc.get("v") != ENCODING_VERSION:
            raise errors.CorruptRecord(f"transaction event has unknown version {doc.get('v')!r}")
        try:
            return TxnEvent(
                kind=EventKind(doc["kind"]),
                transaction_id=_typed(doc, "txid", str),
                at_ms=_typed(doc, "at", int),
                source=_enum_or_none(DecisionSource, doc.get("source")),
                producer_client_id=_optional_str(doc.get("client")),
                decision=_enum_or_none(Decision, doc.get("decision")),
                detail=_optional_str(doc.get("detail")) or "",
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise errors.CorruptRecord(f"transaction event is malformed: {exc!r}") from None


def encode_event(
    kind: EventKind,
    transaction_id: str,
    at_ms: int,
    source: DecisionSource | None,
    client: str | None,
    decision: Decision | None,
    detail: str,
) -> bytes:
    """:meth:`TxnEvent.encode` of the event with these fields, for a caller that holds them (the
    decision: no attribute reads on the event). An enum's ``_value_`` (its value, a plain attribute)
    rather than the ``value`` property (interpreted): this runs once per decision."""
    text = f'{{"v":{ENCODING_VERSION},"kind":"{kind._value_}","txid":{_quote(transaction_id)},"at":{at_ms}'
    if source is not None:
        text += f',"source":"{source._value_}"'
    if client is not None:
        text += f',"client":{_quote(client)}'
    if decision is not None:
        text += f',"decision":"{decision._value_}"'
    if detail:
        text += f',"detail":{_quote(detail)}'
    return (text + "}").encode()


def _typed(doc: dict[str, Any], key: str, kind: type[Any]) -> Any:
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{key} must be {kind.__name__}")
    return value


def _optional_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError("expected a string")


def _enum_or_none(cls: type[_E], value: object) -> _E | None:
    return None if value is None else cls(value)


@slot_init  # one is built per decision
@dataclass(frozen=True, slots=True)
class TxnRecord:
    """What folding a history yields: enough to build a ``HalfView`` (plus immunity and producer liveness)."""

    state: TxnState = TxnState.PENDING
    stored_ms: int | None = None
    checks_delivered: int = 0
    last_check_ms: int | None = None
    decided_ms: int | None = None
    decided_by: DecisionSource | None = None
    conflicts: int = 0


# A TxnEvent or TxnRecord built per decision without its interpreted ``__init__`` (slot_init's: an
# interpreted frame calling one slot setter per field): ``fastinit.slot_maker``'s maker stores each
# field in its slot in one C call (``common/_slots.c``; the slot setters one by one without it), as
# that ``__init__`` does. Same fields, so an equal object (tests/property/test_txn_fast_init.py).
# Final: compiled code reads them from C statics, not the module's dict.
_MAKE_EVENT: Final = slot_maker(
    TxnEvent, ("kind", "transaction_id", "at_ms", "source", "producer_client_id", "decision", "detail")
)
_MAKE_RECORD: Final = slot_maker(
    TxnRecord,
    ("state", "stored_ms", "checks_delivered", "last_check_ms", "decided_ms", "decided_by", "conflicts"),
)


def new_event(
    kind: EventKind,
    transaction_id: str,
    at_ms: int,
    source: DecisionSource | None,
    producer_client_id: str | None,
    decision: Decision | None,
    detail: str,
) -> TxnEvent:
    """``TxnEvent(kind, transaction_id, at_ms, source, producer_client_id, decision, detail)``."""
    event: TxnEvent = _MAKE_EVENT(kind, transaction_id, at_ms, source, producer_client_id, decision, detail)
    return event


def new_record(
    state: TxnState,
    stored_ms: int | None,
    checks_delivered: int,
    last_check_ms: int | None,
    decided_ms: int | None,
    decided_by: DecisionSource | None,
    conflicts: int,
) -> TxnRecord:
    """``TxnRecord(state, stored_ms, checks_delivered, last_check_ms, decided_ms, decided_by, conflicts)``."""
    record: TxnRecord = _MAKE_RECORD(
        state, stored_ms, checks_delivered, last_check_ms, decided_ms, decided_by, conflicts
    )
    return record


def fold(events: Iterable[TxnEvent], start: TxnRecord | None = None) -> TxnRecord:
    """Apply events in order. Idempotent for repeated DECISION events; unknown orderings never raise."""
    record = start or TxnRecord()
    for event in events:
        record = step(record, event)
    return record


def step(record: TxnRecord, event: TxnEvent) -> TxnRecord:
    """One event applied to a record (see the module's recording rules)."""
    kind = event.kind
    if kind is EventKind.HALF_STORED:
        return replace(record, stored_ms=event.at_ms)
    if kind is EventKind.CHECK_SENT:
        if record.state is not TxnState.PENDING:
            return record
        return replace(record, checks_delivered=record.checks_delivered + 1, last_check_ms=event.at_ms)
    decision = event.decision
    if kind is EventKind.DECISION and decision is not None:
        source = event.source  # each attribute read once: a frozen dataclass's are generic reads
        outcome = apply_decision(record.state, decision, source or DecisionSource.PRODUCER)
        if not outcome.changed:
            return record
        # replace(record, state=..., decided_ms=..., decided_by=...) written out, positional (state,
        # stored_ms, checks_delivered, last_check_ms, decided_ms, decided_by, conflicts): once per transaction
        return new_record(
            outcome.state, record.stored_ms, record.checks_delivered, record.last_check_ms, event.at_ms,
            source, record.conflicts,
        )  # fmt: skip
    if kind is EventKind.CONFLICT:
        return replace(record, conflicts=record.conflicts + 1)
    if kind is EventKind.DISCARDED and record.state is TxnState.PENDING:
        return replace(record, state=TxnState.DISCARDED)
    if kind is EventKind.RESUMED and record.state is TxnState.DISCARDED:
        return replace(record, state=TxnState.PENDING, checks_delivered=0, last_check_ms=None)
    return record
