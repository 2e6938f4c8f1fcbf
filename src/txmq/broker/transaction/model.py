"""The state of one transactional (half) message and the rules for changing it. Pure: no I/O, no clock.

A half message starts ``PENDING``. A terminal decision (``COMMIT`` / ``ROLLBACK``) from the producer, from an
answer to a check-back, or from an operator moves it to ``COMMITTED`` / ``ROLLED_BACK``. The check service
moves it to ``DISCARDED`` after the last allowed check went unanswered; an operator can ``resume`` it back
to ``PENDING``.

Rules (DESIGN.md §3, pain points #1, #14, #17):

* **The first terminal decision wins.** The same decision again is a ``DUPLICATE`` (idempotent, nothing
  changes); a different one is a ``CONFLICT``: rejected, and the caller must audit it.
* ``UNKNOWN`` never changes the state (``IGNORED_UNKNOWN``): the message stays where it is.
* **Late decisions on a DISCARDED message are accepted, from every source.** Discarding means "the broker
  gave up asking", not "the transaction rolled back": the producer's database is the source of truth for
  whether the local transaction committed. Rejecting a late COMMIT would lose a message whose business
  change is durable (the very loss transactional messages exist to prevent); accepting a late ROLLBACK
  just closes the case. Such outcomes carry ``late=True`` so they are audited.
* The source never changes the outcome; it is recorded in the history. Even an operator cannot overturn
  a terminal decision: a committed message may already have been consumed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class TxnState(enum.Enum):
    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"

    @property
    def is_terminal(self) -> bool:
        """Resolved for good: no more checks, no more changes."""
        return self in (TxnState.COMMITTED, TxnState.ROLLED_BACK)


class Decision(enum.Enum):
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


class DecisionSource(enum.Enum):
    PRODUCER = "PRODUCER"  # EndTransaction sent by the producer after its local transaction
    CHECK = "CHECK"  # a producer's answer to a check-back
    OPERATOR = "OPERATOR"  # `txmq tx resolve`


class OutcomeKind(enum.Enum):
    ACCEPTED = "ACCEPTED"  # the state changed to a terminal state
    DUPLICATE = "DUPLICATE"  # the same terminal decision again: no effect
    CONFLICT = "CONFLICT"  # a different terminal decision after one was taken: rejected, audit it
    IGNORED_UNKNOWN = "IGNORED_UNKNOWN"  # UNKNOWN: the state stays


@dataclass(frozen=True, slots=True)
class DecisionOutcome:
    kind: OutcomeKind
    state: TxnState  # the state after the decision
    late: bool = False  # accepted on a DISCARDED message

    @property
    def changed(self) -> bool:
        return self.kind is OutcomeKind.ACCEPTED

    @property
    def must_audit(self) -> bool:
        """Conflicts and late decisions must be recorded as such in the message's history."""
        return self.kind is OutcomeKind.CONFLICT or self.late


_TARGET: Final = {Decision.COMMIT: TxnState.COMMITTED, Decision.ROLLBACK: TxnState.ROLLED_BACK}
_A, _D, _C, _U = (
    OutcomeKind.ACCEPTED,
    OutcomeKind.DUPLICATE,
    OutcomeKind.CONFLICT,
    OutcomeKind.IGNORED_UNKNOWN,
)

# (state, decision) -> outcome kind. Every pair is listed; the test checks the table is complete.
TRANSITIONS: Final[dict[tuple[TxnState, Decision], OutcomeKind]] = {
    (TxnState.PENDING, Decision.COMMIT): _A,
    (TxnState.PENDING, Decision.ROLLBACK): _A,
    (TxnState.PENDING, Decision.UNKNOWN): _U,
    (TxnState.COMMITTED, Decision.COMMIT): _D,
    (TxnState.COMMITTED, Decision.ROLLBACK): _C,
    (TxnState.COMMITTED, Decision.UNKNOWN): _U,
    (TxnState.ROLLED_BACK, Decision.COMMIT): _C,
    (TxnState.ROLLED_BACK, Decision.ROLLBACK): _D,
    (TxnState.ROLLED_BACK, Decision.UNKNOWN): _U,
    (TxnState.DISCARDED, Decision.COMMIT): _A,
    (TxnState.DISCARDED, Decision.ROLLBACK): _A,
    (TxnState.DISCARDED, Decision.UNKNOWN): _U,
}


def _outcome(state: TxnState, decision: Decision) -> DecisionOutcome:
    kind = TRANSITIONS[(state, decision)]
    if kind is OutcomeKind.ACCEPTED:
        return DecisionOutcome(kind, _TARGET[decision], late=state is TxnState.DISCARDED)
    return DecisionOutcome(kind, state)


# Outcomes are frozen values of (state, decision) only: built once, not per decision
_OUTCOMES: Final = {pair: _outcome(*pair) for pair in TRANSITIONS}


# the same, as a list: found by identity (a dict lookup hashes both members, an interpreted Enum.__hash__
# each; this runs twice per decision)
_OUTCOME_LIST: Final = [(state, decision, outcome) for (state, decision), outcome in _OUTCOMES.items()]


def apply_decision(state: TxnState, decision: Decision, source: DecisionSource) -> DecisionOutcome:
    """The outcome of ``decision`` (from ``source``) on a message in ``state``; see the module rules."""
    del source  # recorded by the caller in the history; it does not change the outcome (module docstring)
    for known_state, known_decision, outcome in _OUTCOME_LIST:
        if known_state is state and known_decision is decision:
            return outcome
    return _OUTCOMES[(state, decision)]  # not a member pair: the dict's KeyError, as before


def can_discard(state: TxnState) -> bool:
    """Only a pending message can be discarded (by the check service, after its last unanswered check)."""
    return state is TxnState.PENDING


def can_resume(state: TxnState) -> bool:
    """Only a discarded message can be resumed (re-armed for checks) by an operator."""
    return state is TxnState.DISCARDED
