"""History checker: what a run of clients observed, judged against what a queue promises.

The history is a list of JSON-able events, one per client operation step, in the spirit of Jepsen
(``invoke`` / ``ok`` / ``fail`` / ``info`` = outcome unknown) and OpenChaos' QueueChecker:

* ``{"f": "send", "type": "invoke", "msgs": [{"key", "topic", "kind", "fifo_group"?, "seq"?,
  "deliver_ms"?}]}`` then ``{"f": "send", "type": "ok"|"fail"|"info", "keys": [...]}``;
* ``{"f": "db", "key", "outcome": "commit"|"rollback"|"pending"}``: a producer's local transaction
  (the ground truth a check-back answers from); the last one per key is final;
* ``{"f": "end_tx", "type": "invoke", "key", "commit": true|false|null}`` (and its outcome);
* ``{"f": "consume", "t", "group", "via": "pop"|"pull", "msgs": [{"key", "topic", "queue",
  "offset", "fifo_group"?}]}``: what a consumer was handed, at simulated time ``t``;
* ``{"f": "pull_status", "group", "topic", "queue", "status"}`` for an offset that went backwards;
* ``{"f": "end", "drained": {group: [topic, ...]}}``: groups that consumed their topics to the end.

Rules (a message's *key* is unique per logical message; retries reuse it):

* **lost**: an acknowledged send (a transactional one: also committed in the producer's DB) that a
  drained group subscribed to its topic never consumed;
* **duplicates**: deliveries of a key to a group beyond the first (allowed: at-least-once; reported);
* **reordered**: within a FIFO message group, or within a queue for offset pulls, a key first
  consumed after a key sent later (Jepsen "inversion");
* **inconsistent_offsets**: one (topic, queue, offset) seen holding two different keys;
* **phantom**: a consumed key that no send ever carried;
* **wrongly_visible**: a transactional key consumed while its producer had not sent a commit
  decision, or whose final local outcome is not commit;
* **early**: a delayed message consumed before its delivery time;
* **stuck**: a transactional key still pending at the end, or (with ``stuck_ms``) a message first
  consumed more than ``stuck_ms`` after it became deliverable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

Event = Mapping[str, Any]


@dataclass
class SentMessage:
    key: str
    topic: str
    kind: str
    fifo_group: str | None
    seq: int
    deliver_ms: int | None
    invoked_at: int
    acked: bool = False


@dataclass
class Figures:
    """What the checker counted; ``ok`` is true when every safety count is zero."""

    sends_invoked: int = 0
    acknowledged: int = 0
    expected: int = 0
    consumed: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    duplicates: dict[str, int] = field(default_factory=dict)
    reordered: int = 0
    inconsistent_offsets: int = 0
    offset_regressions: int = 0
    phantom: int = 0
    wrongly_visible: int = 0
    early: int = 0
    stuck: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.reordered
            or self.inconsistent_offsets
            or self.offset_regressions
            or self.phantom
            or self.wrongly_visible
            or self.early
        )

    def note(self, anomaly: str, detail: str) -> None:
        """Keep a few examples per anomaly so a failure says which message went wrong."""
        shown = self.examples.setdefault(anomaly, [])
        if len(shown) < 5:
            shown.append(detail)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _State:
    """Everything the rules need, gathered in one pass over the history."""

    def __init__(self) -> None:
        self.sent: dict[str, SentMessage] = {}
        self.db: dict[str, str] = {}
        self.commit_sent_at: dict[str, int] = {}
        self.deliveries: dict[str, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
        self.drained: dict[str, list[str]] = {}
        self.regressions: list[str] = []

    def feed(self, index: int, event: Event) -> None:
        op, kind = event.get("f"), event.get("type")
        if op == "send" and kind == "invoke":
            for m in event["msgs"]:
                if m["key"] not in self.sent:
                    self.sent[m["key"]] = SentMessage(
                        m["key"],
                        m["topic"],
                        m.get("kind", "normal"),
                        m.get("fifo_group"),
                        int(m.get("seq", 0)),
                        m.get("deliver_ms"),
                        index,
                    )
        elif op == "send" and kind == "ok":
            for key in event["keys"]:
                self.sent[key].acked = True
        elif op == "db":
            self.db[event["key"]] = event["outcome"]
        elif op == "end_tx" and kind == "invoke" and event.get("commit") is True:
            self.commit_sent_at.setdefault(event["key"], index)
        elif op == "consume":
            for m in event["msgs"]:
                self.deliveries[event["group"]].append(
                    (index, int(event["t"]), dict(m, via=event.get("via")))
                )
        elif op == "pull_status":
            self.regressions.append(f"{event['group']} {event['topic']}/{event['queue']}: {event['status']}")
        elif op == "end":
            self.drained = {g: list(ts) for g, ts in event["drained"].items()}


def check(history: Iterable[Event], *, stuck_ms: int | None = None) -> Figures:
    """Judge a history; see the module docstring for the rules."""
    state = _State()
    for index, event in enumerate(history):
        state.feed(index, event)
    figures = Figures(sends_invoked=len(state.sent))
    figures.acknowledged = sum(1 for s in state.sent.values() if s.acked)
    expected = {
        k for k, s in state.sent.items() if s.acked and (s.kind != "tx" or state.db.get(k) == "commit")
    }
    figures.expected = len(expected)
    figures.offset_regressions = len(state.regressions)
    for detail in state.regressions:
        figures.note("offset_regressions", detail)
    _check_deliveries(state, figures, stuck_ms)
    _check_order(state, figures)
    _check_lost(state, figures, expected)
    for key, outcome in state.db.items():
        if outcome == "pending" and state.sent.get(key) is not None and state.sent[key].acked:
            figures.stuck += 1
            figures.note("stuck", f"{key}: transaction still pending at the end")
    return figures


def _check_deliveries(state: _State, figures: Figures, stuck_ms: int | None) -> None:
    """Per delivery: phantom, wrongly visible, early, stuck; per group: consumed and duplicates."""
    by_offset: dict[tuple[str, int, int], str] = {}
    for group, deliveries in state.deliveries.items():
        seen: set[str] = set()
        duplicates = 0
        for index, at_ms, m in deliveries:
            key = m["key"]
            sent = state.sent.get(key)
            if sent is None or sent.invoked_at > index:
                figures.phantom += 1
                figures.note("phantom", f"{group} consumed {key}, never sent")
                continue
            if sent.kind == "tx" and (
                state.db.get(key) != "commit" or state.commit_sent_at.get(key, index) >= index
            ):
                figures.wrongly_visible += 1
                figures.note("wrongly_visible", f"{group} consumed {key} (outcome {state.db.get(key)})")
            if sent.deliver_ms is not None and at_ms < sent.deliver_ms:
                figures.early += 1
                figures.note("early", f"{group} consumed {key} at {at_ms} < {sent.deliver_ms}")
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            ready_ms = sent.deliver_ms or 0
            if stuck_ms is not None and sent.deliver_ms is not None and at_ms - ready_ms > stuck_ms:
                figures.stuck += 1
                figures.note("stuck", f"{group} consumed {key} {at_ms - ready_ms} ms after it was due")
            if "offset" in m and "queue" in m:
                where = (m["topic"], int(m["queue"]), int(m["offset"]))
                if by_offset.setdefault(where, key) != key:
                    figures.inconsistent_offsets += 1
                    figures.note("inconsistent_offsets", f"{where} held {by_offset[where]} and {key}")
        figures.consumed[group] = len(seen)
        figures.duplicates[group] = duplicates


def _check_order(state: _State, figures: Figures) -> None:
    """First consumptions within a FIFO group (any consumer) or within a queue (pulls) never go back."""
    for group, deliveries in state.deliveries.items():
        last_seq: dict[str, tuple[int, str]] = {}
        last_offset: dict[tuple[str, int], int] = {}
        first_seen: set[str] = set()
        for _, _, m in deliveries:
            key = m["key"]
            sent = state.sent.get(key)
            if sent is None:
                continue
            if m.get("via") == "pull":
                where = (m["topic"], int(m["queue"]))
                previous = last_offset.get(where, -1)
                if int(m["offset"]) <= previous:
                    figures.reordered += 1
                    figures.note("reordered", f"{group} pulled {where} offset {m['offset']} after {previous}")
                last_offset[where] = int(m["offset"])
            if key in first_seen:
                continue
            first_seen.add(key)
            if sent.fifo_group is not None:
                before = last_seq.get(sent.fifo_group)
                if before is not None and sent.seq < before[0]:
                    figures.reordered += 1
                    figures.note("reordered", f"{group} got {key} (seq {sent.seq}) after {before[1]}")
                if before is None or sent.seq > before[0]:
                    last_seq[sent.fifo_group] = (sent.seq, key)


def _check_lost(state: _State, figures: Figures, expected: set[str]) -> None:
    for group, topics in state.drained.items():
        consumed = {m["key"] for _, _, m in state.deliveries.get(group, [])}
        wanted = set(topics)
        for key in sorted(expected):
            if state.sent[key].topic in wanted and key not in consumed:
                figures.lost += 1
                figures.note("lost", f"{group} never consumed acknowledged {key} ({state.sent[key].topic})")
