"""The transaction history's objects built without their interpreted ``__init__`` equal the class's own.

``history.new_event`` and ``history.new_record`` (one of each per decision) make the object bare and store
each field through its slot's setter; for any fields they give the object the class's constructor gives:
equal, same hash and repr, still frozen.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.broker.transaction.history import (
    EventKind,
    TxnEvent,
    TxnRecord,
    new_event,
    new_record,
)
from txmq.broker.transaction.model import Decision, DecisionSource, TxnState

_MS = st.none() | st.integers(0, 2**63 - 1)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(EventKind),
    txid=st.text(max_size=40),
    at=st.integers(0, 2**63 - 1),
    source=st.none() | st.sampled_from(DecisionSource),
    client=st.none() | st.text(max_size=20),
    decision=st.none() | st.sampled_from(Decision),
    detail=st.text(max_size=20),
)
def test_new_event_is_the_constructed_event(
    kind: EventKind,
    txid: str,
    at: int,
    source: DecisionSource | None,
    client: str | None,
    decision: Decision | None,
    detail: str,
) -> None:
    fast = new_event(kind, txid, at, source, client, decision, detail)
    made = TxnEvent(kind, txid, at, source, client, decision, detail)
    assert type(fast) is TxnEvent
    assert fast == made and hash(fast) == hash(made) and repr(fast) == repr(made)
    assert fast.encode() == made.encode()
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.detail = "changed"  # type: ignore[misc]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    state=st.sampled_from(TxnState),
    stored=_MS,
    checks=st.integers(0, 1000),
    last=_MS,
    decided=_MS,
    by=st.none() | st.sampled_from(DecisionSource),
    conflicts=st.integers(0, 1000),
)
def test_new_record_is_the_constructed_record(
    state: TxnState,
    stored: int | None,
    checks: int,
    last: int | None,
    decided: int | None,
    by: DecisionSource | None,
    conflicts: int,
) -> None:
    fast = new_record(state, stored, checks, last, decided, by, conflicts)
    made = TxnRecord(state, stored, checks, last, decided, by, conflicts)
    assert type(fast) is TxnRecord
    assert fast == made and hash(fast) == hash(made) and repr(fast) == repr(made)
    assert dataclasses.replace(fast, conflicts=conflicts + 1) == dataclasses.replace(
        made, conflicts=conflicts + 1
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.state = TxnState.PENDING  # type: ignore[misc]
