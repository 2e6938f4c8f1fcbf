"""The check-back brain: what to do about one half message now. Pure: the caller passes ``now_ms``.

Timeline of a pending half message (all times are **broker** times, pain point #2)::

    stored_ms ─immunity─▶ 1st check ─interval─▶ 2nd ... ─interval─▶ check_max-th ─interval─▶ DISCARD
      (CHECK_IMMUNITY_TIME_IN_SECONDS,   (each counted only once it was delivered to a
       else transaction_timeout_ms)       live producer: pain points #6, #14)

* Boundaries are inclusive: a check is due at exactly ``stored_ms + immunity_ms`` (pain point #13), so a
  ``WAIT(until_ms)`` is always followed, at ``until_ms``, by something other than the same WAIT.
* A resolved message (COMMITTED / ROLLED_BACK) is ``SKIP``: a late commit stops checks (pain point #1).
  A DISCARDED one is ``SKIP`` too until an operator resumes it.
* With no live producer of the group, a due check becomes ``NO_PRODUCER``: retry later, count nothing.
  Such a message is never discarded for lack of producers; it stays visible in `txmq tx list`.
* Call :func:`decide` only once the op log has been read to its end, so a decision already stored is in
  ``view.state`` (pain point #6: never discard, nor check, before every op record is known).

**Scheduling (what the service should do).** Keep a min-heap of ``(due_ms, half_offset)`` built at start
by folding the half and op logs (pending halves only), pushing ``next_due_ms(view)`` for each. A tick pops
only entries with ``due_ms <= now`` (at most ``limits.transaction_check_batch_max`` per round), so its
cost is O(due · log pending), not O(pending). :class:`.rounds.DueSchedule` is that heap and
:func:`.rounds.plan_round` picks a round's batch. After acting, reschedule the entry at ``next_due_ms``
(or drop it when that is ``None``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from txmq.common import limits

from .model import TxnState


@dataclass(frozen=True, slots=True)
class CheckPolicy:
    """Broker settings for check-back (`--transaction-timeout`, `--transaction-check-interval`, `-max`)."""

    transaction_timeout_ms: int = limits.transaction_timeout_ms_default
    check_interval_ms: int = limits.transaction_check_interval_ms_default
    check_max: int = limits.transaction_check_max_default

    def __post_init__(self) -> None:
        if self.transaction_timeout_ms < 0:
            raise ValueError(f"transaction_timeout_ms must be >= 0, not {self.transaction_timeout_ms}")
        if self.check_interval_ms <= 0:
            raise ValueError(f"check_interval_ms must be > 0, not {self.check_interval_ms}")
        if self.check_max < 1:
            raise ValueError(f"check_max must be >= 1, not {self.check_max}")

    @property
    def no_producer_retry_ms(self) -> int:
        """How long to wait before retrying a due check that had no live producer to go to.

        The service should also re-run a group's due entries as soon as a producer of that group registers.
        """
        return max(1, min(self.check_interval_ms, self.transaction_timeout_ms))


@dataclass(frozen=True, slots=True)
class HalfView:
    """What :func:`decide` needs to know about one half message."""

    stored_ms: int  # broker store time of the half message; never the producer's born time
    state: TxnState = TxnState.PENDING
    checks_delivered: int = 0  # checks actually handed to a live producer
    last_check_ms: int | None = None  # broker time of the last delivered check
    immunity_ms: int | None = None  # CHECK_IMMUNITY_TIME_IN_SECONDS * 1000, if the message set it
    producer_online: bool = True  # a live producer of the group exists now
    born_ms: int | None = None  # the producer's clock: shown to people, never used to schedule


class ActionKind(enum.Enum):
    SKIP = "SKIP"  # resolved or discarded: nothing to do, ever (until resumed)
    WAIT = "WAIT"  # nothing due before until_ms
    CHECK = "CHECK"  # send a check-back now
    DISCARD = "DISCARD"  # check_max checks delivered and the last one went unanswered
    NO_PRODUCER = "NO_PRODUCER"  # a check is due but nobody can answer; retry at until_ms, count nothing


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    until_ms: int | None = None  # for WAIT and NO_PRODUCER

    def __repr__(self) -> str:
        return self.kind.value if self.until_ms is None else f"{self.kind.value}(until_ms={self.until_ms})"


SKIP = Action(ActionKind.SKIP)
CHECK = Action(ActionKind.CHECK)
DISCARD = Action(ActionKind.DISCARD)


def immunity_ms(view: HalfView, policy: CheckPolicy) -> int:
    """The message's own immunity if it set one, else the broker's transaction timeout."""
    return policy.transaction_timeout_ms if view.immunity_ms is None else view.immunity_ms


def immunity_ms_from_property(value: str | None) -> int | None:
    """Parse CHECK_IMMUNITY_TIME_IN_SECONDS; ``None`` (use the broker default) when absent or invalid."""
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return seconds * 1000 if seconds >= 0 else None


def next_due_ms(view: HalfView, policy: CheckPolicy) -> int | None:
    """When :func:`decide` will next return something other than WAIT; ``None`` when never (SKIP)."""
    if view.state is not TxnState.PENDING:
        return None
    if view.checks_delivered == 0 or view.last_check_ms is None:
        return view.stored_ms + immunity_ms(view, policy)
    return view.last_check_ms + policy.check_interval_ms


def decide(view: HalfView, now_ms: int, policy: CheckPolicy) -> Action:
    """The one action for ``view`` at broker time ``now_ms`` (see the module docstring)."""
    due_ms = next_due_ms(view, policy)
    if due_ms is None:
        return SKIP
    if now_ms < due_ms:
        return Action(ActionKind.WAIT, due_ms)
    if view.checks_delivered >= policy.check_max:
        return DISCARD
    if not view.producer_online:
        return Action(ActionKind.NO_PRODUCER, now_ms + policy.no_producer_retry_ms)
    return CHECK
