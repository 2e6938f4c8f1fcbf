"""The check-back decision at every edge, the due-time schedule and the bounded round planner."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txmq.broker.transaction.decide import (
    CHECK,
    DISCARD,
    SKIP,
    Action,
    ActionKind,
    CheckPolicy,
    HalfView,
    decide,
    immunity_ms_from_property,
    next_due_ms,
)
from txmq.broker.transaction.model import TxnState
from txmq.broker.transaction.rounds import (
    START,
    DueEntry,
    DueSchedule,
    RoundCursor,
    plan_round,
    retry_backoff_ms,
    settle_round,
)
from txmq.common import limits

POLICY = CheckPolicy()
T0 = 1_700_000_000_000


def wait(until: int) -> Action:
    return Action(ActionKind.WAIT, until)


def test_policy_defaults_come_from_limits() -> None:
    assert (POLICY.transaction_timeout_ms, POLICY.check_interval_ms, POLICY.check_max) == (
        limits.transaction_timeout_ms_default,
        limits.transaction_check_interval_ms_default,
        limits.transaction_check_max_default,
    )
    assert (POLICY.transaction_timeout_ms, POLICY.check_interval_ms, POLICY.check_max) == (6000, 30000, 15)


@pytest.mark.parametrize(
    "kwargs", [{"transaction_timeout_ms": -1}, {"check_interval_ms": 0}, {"check_max": 0}]
)
def test_policy_rejects_nonsense(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        CheckPolicy(**kwargs)


def test_first_check_exactly_at_the_timeout_boundary() -> None:
    view = HalfView(stored_ms=T0)
    assert decide(view, T0, POLICY) == wait(T0 + 6000)
    assert decide(view, T0 + 5999, POLICY) == wait(T0 + 6000)
    assert decide(view, T0 + 6000, POLICY) == CHECK  # inclusive: pain point #13
    assert decide(view, T0 + 6001, POLICY) == CHECK


def test_message_immunity_overrides_the_timeout() -> None:
    long = HalfView(stored_ms=T0, immunity_ms=3_600_000)
    assert decide(long, T0 + 3_599_999, POLICY) == wait(T0 + 3_600_000)
    assert decide(long, T0 + 3_600_000, POLICY) == CHECK
    short = HalfView(stored_ms=T0, immunity_ms=0)
    assert decide(short, T0, POLICY) == CHECK


def test_long_immunity_never_discards_without_checks() -> None:
    """Pain point #6: rounds passing during a long immunity must not count as checks."""
    view = HalfView(stored_ms=T0, immunity_ms=15 * 3600 * 1000)
    for hour in range(15):
        assert decide(view, T0 + hour * 3_600_000, POLICY).kind is ActionKind.WAIT
    assert decide(view, T0 + 15 * 3_600_000, POLICY) == CHECK


def test_interval_between_delivered_checks_then_discard() -> None:
    view = HalfView(stored_ms=T0, checks_delivered=3, last_check_ms=T0 + 66_000)
    assert decide(view, T0 + 95_999, POLICY) == wait(T0 + 96_000)
    assert decide(view, T0 + 96_000, POLICY) == CHECK
    last = dataclasses.replace(view, checks_delivered=15, last_check_ms=T0 + 426_000)
    assert decide(last, T0 + 455_999, POLICY) == wait(T0 + 456_000)  # the final interval for an answer
    assert decide(last, T0 + 456_000, POLICY) == DISCARD


def test_no_producer_retries_without_counting() -> None:
    view = HalfView(stored_ms=T0, producer_online=False)
    assert decide(view, T0 + 1000, POLICY) == wait(T0 + 6000)
    assert decide(view, T0 + 6000, POLICY) == Action(ActionKind.NO_PRODUCER, T0 + 12_000)
    # The view did not change (nothing was delivered), so the next due time is still the first check.
    assert next_due_ms(view, POLICY) == T0 + 6000
    # Max checks delivered, then the producers vanish: discard still happens after the final interval.
    spent = dataclasses.replace(view, checks_delivered=15, last_check_ms=T0)
    assert decide(spent, T0 + 30_000, POLICY) == DISCARD


@pytest.mark.parametrize("state", [TxnState.COMMITTED, TxnState.ROLLED_BACK, TxnState.DISCARDED])
def test_resolved_or_discarded_is_skipped(state: TxnState) -> None:
    """A late commit stops further checks (pain point #1), whatever the count or the clock."""
    view = HalfView(stored_ms=T0, state=state, checks_delivered=4, last_check_ms=T0 + 100_000)
    for now in (T0, T0 + 6000, T0 + 10**9):
        assert decide(view, now, POLICY) == SKIP
    assert next_due_ms(view, POLICY) is None


def test_immunity_property_parsing() -> None:
    assert immunity_ms_from_property(None) is None
    assert immunity_ms_from_property("60") == 60_000
    assert immunity_ms_from_property(" 0 ") == 0
    assert immunity_ms_from_property("-1") is None
    assert immunity_ms_from_property("soon") is None


views = st.builds(
    HalfView,
    stored_ms=st.integers(0, 2**45),
    state=st.sampled_from(list(TxnState)),
    checks_delivered=st.integers(0, 20),
    last_check_ms=st.none() | st.integers(0, 2**45),
    immunity_ms=st.none() | st.integers(0, 10**8),
    producer_online=st.booleans(),
    born_ms=st.none() | st.integers(0, 2**46),
)
policies = st.builds(
    CheckPolicy,
    transaction_timeout_ms=st.integers(0, 10**6),
    check_interval_ms=st.integers(1, 10**6),
    check_max=st.integers(1, 20),
)


@given(views, policies, st.integers(0, 2**46))
def test_decide_agrees_with_next_due(view: HalfView, policy: CheckPolicy, now: int) -> None:
    action = decide(view, now, policy)
    due = next_due_ms(view, policy)
    if due is None:
        assert action == SKIP
    elif now < due:
        assert action == wait(due)
    else:
        assert action.kind in (ActionKind.CHECK, ActionKind.DISCARD, ActionKind.NO_PRODUCER)
        # Progress: waking at the promised time never yields the same WAIT again (pain point #13).
    if action.kind is ActionKind.WAIT:
        assert action.until_ms is not None
        assert action.until_ms > now
        assert decide(view, action.until_ms, policy).kind is not ActionKind.WAIT
    if action.kind is ActionKind.NO_PRODUCER:
        assert action.until_ms is not None
        assert action.until_ms > now
    if action.kind is ActionKind.DISCARD:
        assert view.checks_delivered >= policy.check_max


@given(views, policies, st.integers(0, 2**46), st.none() | st.integers(0, 2**46))
def test_producer_born_time_is_irrelevant(
    view: HalfView, policy: CheckPolicy, now: int, born: int | None
) -> None:
    """Pain point #2: skew between the producer's clock and the broker's cannot trigger or delay checks."""
    assert decide(view, now, policy) == decide(dataclasses.replace(view, born_ms=born), now, policy)


@given(policies, st.integers(0, 10**7), st.none() | st.integers(0, 10**6))
def test_simulated_life_of_an_unanswered_message(
    policy: CheckPolicy, stored: int, immunity: int | None
) -> None:
    """Following the actions exactly: check_max delivered checks, then a discard, never earlier."""
    view = HalfView(stored_ms=stored, immunity_ms=immunity)
    now = stored
    checks: list[int] = []
    for _ in range(3 * policy.check_max + 3):
        action = decide(view, now, policy)
        if action.kind is ActionKind.WAIT:
            assert action.until_ms is not None
            now = action.until_ms
        elif action.kind is ActionKind.CHECK:
            checks.append(now)
            view = dataclasses.replace(view, checks_delivered=view.checks_delivered + 1, last_check_ms=now)
        else:
            break
    assert action == DISCARD
    assert len(checks) == policy.check_max
    first_due = stored + (policy.transaction_timeout_ms if immunity is None else immunity)
    assert checks[0] == first_due
    assert all(b - a == policy.check_interval_ms for a, b in itertools_pairwise(checks))
    assert now == checks[-1] + policy.check_interval_ms


def itertools_pairwise(items: list[int]) -> list[tuple[int, int]]:
    return list(itertools.pairwise(items))


# --- rounds --------------------------------------------------------------------------------------------


def test_plan_round_bounded_and_cursor_advances() -> None:
    due = [DueEntry(10, 1), DueEntry(10, 2), DueEntry(20, 3), DueEntry(30, 4), DueEntry(99, 5)]
    plan = plan_round(due, now_ms=50, budget=2)
    assert plan.batch == (DueEntry(10, 1), DueEntry(10, 2))
    assert plan.cursor == RoundCursor(10, 2)
    assert not plan.sweep_complete
    # Nothing was executed (say every action failed): the next round still continues after the cursor.
    plan2 = plan_round(due, now_ms=50, cursor=plan.cursor, budget=2)
    assert plan2.batch == (DueEntry(20, 3), DueEntry(30, 4))
    assert plan2.sweep_complete
    assert plan2.cursor == START
    # A new sweep starts from the beginning (entries still due come back, once per sweep).
    plan3 = plan_round(due, now_ms=50, cursor=plan2.cursor, budget=2)
    assert plan3.batch == plan.batch
    assert plan_round(due, now_ms=5).batch == ()
    with pytest.raises(ValueError):
        plan_round(due, now_ms=5, budget=0)


def test_exact_budget_completes_the_sweep() -> None:
    due = [DueEntry(10, 1), DueEntry(10, 2)]
    plan = plan_round(due, now_ms=10, budget=2)
    assert plan.batch == tuple(due)
    assert plan.sweep_complete
    assert plan.cursor == START


def test_poison_record_never_blocks_the_round() -> None:
    """Pain points #7/#8: an entry whose action always fails is skipped with a reason; others progress."""
    schedule = DueSchedule(DueEntry(100, offset) for offset in range(10))
    poison = 3
    cursor = START
    handled: list[int] = []
    failures_in_a_row = 0
    now = 100
    for _ in range(8):
        plan = plan_round(schedule.iter_due(now), now, cursor, budget=4)
        failures = {e.offset: "CorruptRecord: bad CRC" for e in plan.batch if e.offset == poison}
        if failures:
            failures_in_a_row += 1
        skipped = settle_round(plan, failures, {poison: failures_in_a_row}, now, POLICY)
        for entry in plan.batch:
            if entry.offset != poison:
                handled.append(entry.offset)
                schedule.set(entry.offset, None)  # resolved
        for skip in skipped:
            assert skip.reason.startswith("CorruptRecord")
            schedule.set(skip.offset, skip.retry_at_ms)
        cursor = plan.cursor
        now += 500
    assert sorted(handled) == [o for o in range(10) if o != poison]
    assert len(schedule) == 1
    assert schedule.due_ms(poison) is not None


def test_retry_backoff_is_a_power_of_two_capped() -> None:
    assert [retry_backoff_ms(n, POLICY) for n in range(1, 8)] == [1000, 2000, 4000, 8000, 16000, 30000, 30000]
    assert retry_backoff_ms(10**6, POLICY) == 30000
    with pytest.raises(ValueError):
        retry_backoff_ms(0, POLICY)


@given(
    st.lists(st.tuples(st.integers(0, 50), st.none() | st.integers(0, 100)), max_size=60),
    st.integers(0, 100),
)
def test_due_schedule_matches_a_dict(ops: list[tuple[int, int | None]], now: int) -> None:
    schedule = DueSchedule()
    model: dict[int, int] = {}
    for offset, due in ops:
        schedule.set(offset, due)
        if due is None:
            model.pop(offset, None)
        else:
            model[offset] = due
    assert len(schedule) == len(model)
    expected = sorted(DueEntry(d, o) for o, d in model.items() if d <= now)
    assert list(schedule.iter_due(now)) == expected
    assert schedule.next_due_ms() == (min(model.values()) if model else None)


def test_due_schedule_compacts_and_is_cheap_for_not_due() -> None:
    schedule = DueSchedule(DueEntry(10_000 + i, i) for i in range(100_000))
    schedule.set(5, 1)
    # Only the due entry is visited, not the 100,000 pending ones.
    assert list(schedule.iter_due(1)) == [DueEntry(1, 5)]
    for i in range(5000):
        schedule.set(7, i + 20_000)
    assert len(schedule._heap) < 2 * len(schedule) + 1025
    assert schedule.due_ms(7) == 24_999
