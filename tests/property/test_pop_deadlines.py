"""A stateful model check of POP's in-flight deadline heap against the scan it replaced.

``QueueState`` keeps a lazy min-heap of (deadline, offset, nonce) next to ``inflight``: acks and changes
of invisible time leave stale items behind, which must never be reported, and the heap is rebuilt when
stale items pile up. The model is the old algorithm: scan every in-flight entry; ``due`` returns those
with deadline <= now in offset order (and forgets them, as ``PopService._expire`` does) and
``next_deadline`` their minimum.
"""

from __future__ import annotations

import itertools

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from txmq.broker.pop import InFlight, QueueState

OFFSETS = st.integers(min_value=0, max_value=40)
TIMES = st.integers(min_value=0, max_value=200)


class DeadlineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = QueueState(base=0, scan=0)
        self.model: dict[int, int] = {}  # offset -> deadline
        self.nonces = itertools.count(1)
        self.now = 0
        self.peak = 0  # the most entries ever in flight at once

    @rule(offset=OFFSETS, delay=TIMES)
    def lease(self, offset: int, delay: int) -> None:
        if offset in self.model:
            return  # a queue offset is leased once until acked or expired
        entry = InFlight(next(self.nonces), self.now + delay, 1, offset * 100, None)
        self.state.inflight[offset] = entry
        self.state.schedule(offset, entry)
        self.model[offset] = entry.deadline_ms
        self.peak = max(self.peak, len(self.model))

    @rule(offset=OFFSETS, delay=TIMES)
    def change_invisible(self, offset: int, delay: int) -> None:
        entry = self.state.inflight.get(offset)
        if entry is None:
            return
        entry.nonce = next(self.nonces)
        entry.deadline_ms = self.now + delay
        self.state.schedule(offset, entry)
        self.model[offset] = entry.deadline_ms

    @rule(offset=OFFSETS)
    def ack(self, offset: int) -> None:
        if self.state.inflight.pop(offset, None) is not None:
            del self.model[offset]

    @rule(step=st.integers(min_value=0, max_value=60))
    def expire(self, step: int) -> None:
        self.now += step
        expected = sorted(o for o, d in self.model.items() if d <= self.now)
        found = self.state.due(self.now)
        assert [o for o, _ in found] == expected
        for offset, entry in found:
            assert self.state.inflight[offset] is entry
            del self.state.inflight[offset]  # what _expire does with each due entry
            del self.model[offset]

    @invariant()
    def next_deadline_is_the_minimum(self) -> None:
        assert self.state.next_deadline() == (min(self.model.values()) if self.model else None)

    @invariant()
    def stale_items_stay_bounded(self) -> None:
        assert len(self.state.deadlines) <= 2 * self.peak + 65


DeadlineMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=80, deadline=None)
TestDeadlines = DeadlineMachine.TestCase
