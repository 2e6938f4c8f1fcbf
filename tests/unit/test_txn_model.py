"""The transaction state table (every (state, decision, source) triple) and the history codec and fold."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txmq.broker.transaction.history import EventKind, TxnEvent, TxnRecord, fold
from txmq.broker.transaction.model import (
    TRANSITIONS,
    Decision,
    DecisionSource,
    OutcomeKind,
    TxnState,
    apply_decision,
    can_discard,
    can_resume,
)
from txmq.common import errors

ALL_TRIPLES = list(itertools.product(TxnState, Decision, DecisionSource))

# The expected outcome of every triple, written out independently of the table in model.py.
EXPECTED = {
    (TxnState.PENDING, Decision.COMMIT): (OutcomeKind.ACCEPTED, TxnState.COMMITTED, False),
    (TxnState.PENDING, Decision.ROLLBACK): (OutcomeKind.ACCEPTED, TxnState.ROLLED_BACK, False),
    (TxnState.PENDING, Decision.UNKNOWN): (OutcomeKind.IGNORED_UNKNOWN, TxnState.PENDING, False),
    (TxnState.COMMITTED, Decision.COMMIT): (OutcomeKind.DUPLICATE, TxnState.COMMITTED, False),
    (TxnState.COMMITTED, Decision.ROLLBACK): (OutcomeKind.CONFLICT, TxnState.COMMITTED, False),
    (TxnState.COMMITTED, Decision.UNKNOWN): (OutcomeKind.IGNORED_UNKNOWN, TxnState.COMMITTED, False),
    (TxnState.ROLLED_BACK, Decision.COMMIT): (OutcomeKind.CONFLICT, TxnState.ROLLED_BACK, False),
    (TxnState.ROLLED_BACK, Decision.ROLLBACK): (OutcomeKind.DUPLICATE, TxnState.ROLLED_BACK, False),
    (TxnState.ROLLED_BACK, Decision.UNKNOWN): (OutcomeKind.IGNORED_UNKNOWN, TxnState.ROLLED_BACK, False),
    (TxnState.DISCARDED, Decision.COMMIT): (OutcomeKind.ACCEPTED, TxnState.COMMITTED, True),
    (TxnState.DISCARDED, Decision.ROLLBACK): (OutcomeKind.ACCEPTED, TxnState.ROLLED_BACK, True),
    (TxnState.DISCARDED, Decision.UNKNOWN): (OutcomeKind.IGNORED_UNKNOWN, TxnState.DISCARDED, False),
}


def test_table_is_complete() -> None:
    assert set(TRANSITIONS) == set(itertools.product(TxnState, Decision))


@pytest.mark.parametrize(("state", "decision", "source"), ALL_TRIPLES)
def test_every_triple(state: TxnState, decision: Decision, source: DecisionSource) -> None:
    outcome = apply_decision(state, decision, source)
    kind, after, late = EXPECTED[(state, decision)]
    assert (outcome.kind, outcome.state, outcome.late) == (kind, after, late)
    assert outcome.changed == (kind is OutcomeKind.ACCEPTED)
    assert outcome.must_audit == (kind is OutcomeKind.CONFLICT or late)


@given(st.sampled_from(ALL_TRIPLES))
def test_outcome_invariants(triple: tuple[TxnState, Decision, DecisionSource]) -> None:
    state, decision, source = triple
    outcome = apply_decision(state, decision, source)
    if state.is_terminal:
        assert outcome.state is state, "a terminal decision is never overturned"
        assert not outcome.changed
    if decision is Decision.UNKNOWN:
        assert outcome.state is state
    if outcome.changed:
        assert outcome.state.is_terminal
    # Applying the same decision again is idempotent.
    again = apply_decision(outcome.state, decision, source)
    assert again.state is outcome.state
    assert not again.changed


@given(
    st.lists(st.tuples(st.sampled_from(list(Decision)), st.sampled_from(list(DecisionSource))), max_size=12),
    st.booleans(),
)
def test_first_terminal_decision_wins(
    decisions: list[tuple[Decision, DecisionSource]], discarded: bool
) -> None:
    state = TxnState.DISCARDED if discarded else TxnState.PENDING
    first = next((d for d, _ in decisions if d is not Decision.UNKNOWN), None)
    for decision, source in decisions:
        state = apply_decision(state, decision, source).state
    if first is None:
        assert state is (TxnState.DISCARDED if discarded else TxnState.PENDING)
    else:
        assert state is (TxnState.COMMITTED if first is Decision.COMMIT else TxnState.ROLLED_BACK)


def test_discard_and_resume_guards() -> None:
    assert [s for s in TxnState if can_discard(s)] == [TxnState.PENDING]
    assert [s for s in TxnState if can_resume(s)] == [TxnState.DISCARDED]


# --- history -------------------------------------------------------------------------------------------

events = st.builds(
    TxnEvent,
    kind=st.sampled_from(list(EventKind)),
    transaction_id=st.text(max_size=40),
    at_ms=st.integers(min_value=0, max_value=2**63 - 1),
    source=st.none() | st.sampled_from(list(DecisionSource)),
    producer_client_id=st.none() | st.text(max_size=20),
    decision=st.none() | st.sampled_from(list(Decision)),
    detail=st.text(max_size=60),
)


@given(events)
def test_event_round_trip(event: TxnEvent) -> None:
    assert TxnEvent.decode(event.encode()) == event


@given(st.binary(max_size=200))
def test_decoding_garbage_raises_corrupt_record_only(data: bytes) -> None:
    try:
        TxnEvent.decode(data)
    except errors.CorruptRecord:
        pass


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"v":2,"kind":"DECISION","txid":"t","at":1}',
        b'{"v":1,"kind":"NOPE","txid":"t","at":1}',
        b'{"v":1,"kind":"DECISION","txid":"t","at":"1"}',
        b'{"v":1,"kind":"DECISION","txid":"t","at":true}',
        b'{"v":1,"kind":"DECISION","at":1}',
        b'{"v":1,"kind":"DECISION","txid":"t","at":1,"decision":"MAYBE"}',
        b'{"v":1,"kind":"DECISION","txid":"t","at":1,"client":5}',
        b"\xff\xfe",
    ],
)
def test_decode_rejects(data: bytes) -> None:
    with pytest.raises(errors.CorruptRecord):
        TxnEvent.decode(data)


def _ev(
    kind: EventKind, at: int, decision: Decision | None = None, source: DecisionSource | None = None
) -> TxnEvent:
    return TxnEvent(kind, "tx-1", at, source=source, decision=decision)


def test_fold_counts_checks_and_stops_at_decision() -> None:
    history = [
        _ev(EventKind.HALF_STORED, 1000),
        _ev(EventKind.CHECK_SENT, 7000),
        _ev(EventKind.CHECK_ANSWER, 7010, Decision.UNKNOWN, DecisionSource.CHECK),
        _ev(EventKind.CHECK_SENT, 37000),
        _ev(EventKind.DECISION, 40000, Decision.COMMIT, DecisionSource.PRODUCER),  # late commit (#1)
        _ev(EventKind.CHECK_SENT, 67000),  # would be a bug in the service; ignored once resolved
        _ev(EventKind.DECISION, 68000, Decision.COMMIT, DecisionSource.CHECK),  # duplicate
        _ev(EventKind.CONFLICT, 69000, Decision.ROLLBACK, DecisionSource.OPERATOR),
    ]
    record = fold(history)
    assert record == TxnRecord(
        state=TxnState.COMMITTED,
        stored_ms=1000,
        checks_delivered=2,
        last_check_ms=37000,
        decided_ms=40000,
        decided_by=DecisionSource.PRODUCER,
        conflicts=1,
    )


def test_fold_discard_resume_and_late_commit() -> None:
    history = [_ev(EventKind.HALF_STORED, 0)]
    history += [_ev(EventKind.CHECK_SENT, 6000 + 30000 * i) for i in range(15)]
    history.append(_ev(EventKind.DISCARDED, 6000 + 30000 * 15))
    record = fold(history)
    assert (record.state, record.checks_delivered) == (TxnState.DISCARDED, 15)
    resumed = fold([_ev(EventKind.RESUMED, 10**6)], record)
    assert (resumed.state, resumed.checks_delivered, resumed.last_check_ms) == (TxnState.PENDING, 0, None)
    late = fold([_ev(EventKind.DECISION, 10**6, Decision.COMMIT, DecisionSource.PRODUCER)], record)
    assert late.state is TxnState.COMMITTED
    # DISCARDED/RESUMED out of place change nothing.
    assert fold([_ev(EventKind.RESUMED, 5)], late) == late
    assert fold([_ev(EventKind.DISCARDED, 5)], late) == late
