"""The history checker on hand-made histories: it must catch each anomaly, and pass a clean one."""

from __future__ import annotations

from typing import Any

from txmq.testing.checker import check


def send(key: str, topic: str = "t", ok: bool = True, **meta: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"f": "send", "type": "invoke", "msgs": [{"key": key, "topic": topic, **meta}]}
    ]
    events.append({"f": "send", "type": "ok" if ok else "info", "keys": [key]})
    return events


def consume(group: str, t: int = 0, via: str = "pop", **m: Any) -> dict[str, Any]:
    return {"f": "consume", "type": "ok", "group": group, "via": via, "t": t, "msgs": [{"topic": "t", **m}]}


END = {"f": "end", "type": "info", "drained": {"g": ["t"]}}


def test_clean_history_is_ok() -> None:
    h = [
        *send("a"),
        *send("b"),
        consume("g", key="a", queue=0, offset=0),
        consume("g", key="b", queue=0, offset=1),
        END,
    ]
    f = check(h)
    assert f.ok
    assert f.acknowledged == 2
    assert f.consumed == {"g": 2}
    assert f.lost == 0


def test_lost_acknowledged_message() -> None:
    f = check([*send("a"), *send("b"), consume("g", key="a"), END])
    assert f.lost == 1
    assert not f.ok
    assert "b" in f.examples["lost"][0]


def test_unacknowledged_unconsumed_is_not_lost() -> None:
    assert check([*send("a", ok=False), END]).lost == 0


def test_duplicates_counted_not_failed() -> None:
    f = check([*send("a"), consume("g", key="a"), consume("g", key="a"), END])
    assert f.duplicates == {"g": 1}
    assert f.ok


def test_phantom() -> None:
    f = check([consume("g", key="ghost"), END])
    assert f.phantom == 1
    assert not f.ok


def test_rolled_back_transaction_visible() -> None:
    h = [
        {"f": "db", "type": "ok", "key": "x", "outcome": "rollback"},
        *send("x", kind="tx"),
        consume("g", key="x"),
        END,
    ]
    assert check(h).wrongly_visible == 1


def test_committed_transaction_visible_before_commit_was_sent() -> None:
    h = [
        *send("x", kind="tx"),
        consume("g", key="x"),
        {"f": "db", "type": "ok", "key": "x", "outcome": "commit"},
        {"f": "end_tx", "type": "invoke", "key": "x", "commit": True},
        END,
    ]
    assert check(h).wrongly_visible == 1


def test_committed_transaction_not_consumed_is_lost_and_after_commit_is_fine() -> None:
    db = {"f": "db", "type": "ok", "key": "x", "outcome": "commit"}
    commit = {"f": "end_tx", "type": "invoke", "key": "x", "commit": True}
    assert check([*send("x", kind="tx"), db, commit, END]).lost == 1
    assert check([*send("x", kind="tx"), db, commit, consume("g", key="x"), END]).ok


def test_pending_transaction_is_stuck() -> None:
    h = [*send("x", kind="tx"), {"f": "db", "type": "ok", "key": "x", "outcome": "pending"}, END]
    assert check(h).stuck == 1


def test_early_delayed_message() -> None:
    f = check([*send("d", deliver_ms=1_000), consume("g", t=999, key="d"), END])
    assert f.early == 1
    assert not f.ok
    assert check([*send("d", deliver_ms=1_000), consume("g", t=1_000, key="d"), END]).early == 0


def test_late_delayed_message_is_stuck_with_a_bound() -> None:
    h = [*send("d", deliver_ms=1_000), consume("g", t=9_000, key="d"), END]
    assert check(h, stuck_ms=5_000).stuck == 1
    assert check(h).stuck == 0


def test_fifo_reorder() -> None:
    h = [
        *send("a", fifo_group="o", seq=1),
        *send("b", fifo_group="o", seq=2),
        consume("g", key="b"),
        consume("g", key="a"),
        END,
    ]
    assert check(h).reordered == 1
    h_ok = [
        *send("a", fifo_group="o", seq=1),
        *send("b", fifo_group="o", seq=2),
        consume("g", key="a"),
        consume("g", key="b"),
        consume("g", key="a"),
        END,
    ]
    assert check(h_ok).reordered == 0  # a redelivery is a duplicate, not a reorder


def test_pull_reorder_within_a_queue() -> None:
    h = [
        *send("a"),
        *send("b"),
        consume("g", via="pull", key="b", queue=0, offset=1),
        consume("g", via="pull", key="a", queue=0, offset=0),
        END,
    ]
    assert check(h).reordered == 1


def test_inconsistent_offsets() -> None:
    h = [
        *send("a"),
        *send("b"),
        consume("g", key="a", queue=0, offset=0),
        consume("h", key="b", queue=0, offset=0),
        END,
    ]
    assert check(h).inconsistent_offsets == 1


def test_offset_regression() -> None:
    h = [
        {
            "f": "pull_status",
            "type": "info",
            "group": "g",
            "topic": "t",
            "queue": 0,
            "status": "OFFSET_OVERFLOW",
        },
        END,
    ]
    assert check(h).offset_regressions == 1
