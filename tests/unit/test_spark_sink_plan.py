"""The exactly-once sink's decisions and the reconciliation report, without a JVM or a broker."""

from __future__ import annotations

import pytest

from txmq.common import errors
from txmq.spark.reconcile_report import Discrepancy, build_report, parse_ledger_url
from txmq.spark.sink_plan import (
    SEQ_PROPERTY,
    TRY_PROPERTY,
    CommitPlan,
    HalfTag,
    Marker,
    SinkRecord,
    Verdict,
    abort_verdict,
    check_columns,
    default_sink_id,
    marker_topic,
    message_of,
    parse_sink_options,
    plan_commit,
    producer_group,
    row_properties,
    tag_of,
    verdict_for,
)


def _record(*markers: tuple[str, set[str]]) -> SinkRecord:
    return SinkRecord.of(Marker("s", epoch, frozenset(tokens), len(tokens)) for epoch, tokens in markers)


def test_plan_commit_records_new_batches_and_rolls_back_replays() -> None:
    record = _record(("0", {"a"}), ("2", {"b"}))
    assert plan_commit("3", record, 5) is CommitPlan.RECORD_AND_COMMIT
    assert plan_commit("2", record, 5) is CommitPlan.ROLLBACK_REPLAY  # recorded: a replay
    assert plan_commit("1", record, 5) is CommitPlan.ROLLBACK_REPLAY  # older than the newest marker
    assert plan_commit("3", record, 0) is CommitPlan.NOTHING
    assert plan_commit("job-x", record, 1) is CommitPlan.RECORD_AND_COMMIT
    assert plan_commit("job-x", _record(("job-x", {"t"})), 1) is CommitPlan.ROLLBACK_REPLAY
    assert plan_commit("0", SinkRecord(), 1) is CommitPlan.RECORD_AND_COMMIT


@pytest.mark.parametrize(
    ("epoch", "token", "expected"),
    [
        ("2", "b", Verdict.COMMIT),  # recorded with its token: the driver died before ending it
        ("2", "old-attempt", Verdict.ROLLBACK),  # a failed task attempt or a replay of batch 2
        ("1", "c", Verdict.ROLLBACK),  # no marker for 1 but the query recorded 2: moved on
        ("3", "d", Verdict.UNKNOWN),  # batch 3 may be committing right now
        ("job-y", "e", Verdict.UNKNOWN),  # a batch job without a marker: its driver may still record it
        ("job-x", "t", Verdict.COMMIT),
        ("job-x", "u", Verdict.ROLLBACK),
    ],
)
def test_check_back_verdicts(epoch: str, token: str, expected: Verdict) -> None:
    record = _record(("0", {"a"}), ("2", {"b"}), ("job-x", {"t"}))
    assert verdict_for(HalfTag("s", epoch, token), record) is expected


def test_abort_rolls_back_unless_the_marker_is_there() -> None:
    record = _record(("2", {"b"}))
    assert abort_verdict(HalfTag("s", "3", "d"), record) is Verdict.ROLLBACK
    assert abort_verdict(HalfTag("s", "2", "b"), record) is Verdict.COMMIT
    assert abort_verdict(HalfTag("s", "2", "z"), record) is Verdict.ROLLBACK


def test_marker_round_trip_and_repeated_append() -> None:
    marker = Marker("s", "4", frozenset({"x", "y"}), 7, 123)
    assert Marker.decode(marker.encode()) == marker
    record = SinkRecord.of([marker, Marker("s", "4", frozenset({"x", "y"}), 7, 124)])
    assert record.latest_batch == 4
    assert record.markers["4"].committed_at_ms == 123
    with pytest.raises(errors.ProtocolError):
        Marker.decode(b"{not json")


def test_tags_travel_in_properties() -> None:
    tag = HalfTag("s", "9", "tok")
    assert tag_of(tag.properties(3)) == tag
    assert tag.batch_id == 9
    assert HalfTag("s", "job-1", "t").batch_id is None
    assert tag_of({"a": "b"}) is None


def test_names_are_legal_and_stable() -> None:
    assert marker_topic("orders") == "TXMQ_SINK_orders"
    assert producer_group("orders") == "txmq-sink-orders"
    long_id = "a/b c" * 20
    assert marker_topic(long_id) == marker_topic(long_id)
    assert marker_topic(long_id).replace("_", "").isalnum()
    assert default_sink_id("/chk/q1") == default_sink_id("/chk/q1/") != default_sink_id("/chk/q2")


def test_options() -> None:
    streaming = parse_sink_options({"endpoints": "h:9876", "checkpointLocation": "/c"}, streaming=True)
    assert streaming.sink_id == default_sink_id("/c")
    assert streaming.topic is None
    assert streaming.check_immunity_s == 60
    explicit = parse_sink_options(
        {"endpoints": "h:9876", "sinkid": "x", "topic": "t", "checkimmunityseconds": "60"}, streaming=True
    )
    assert (explicit.sink_id, explicit.topic, explicit.check_immunity_s) == ("x", "t", 60)
    assert parse_sink_options({"endpoints": "h:9876"}, streaming=False).sink_id == "batch"
    with pytest.raises(errors.InvalidArgument, match="sinkId or option checkpointLocation"):
        parse_sink_options({"endpoints": "h:9876"}, streaming=True)
    with pytest.raises(errors.InvalidArgument, match="endpoints"):
        parse_sink_options({"topic": "t"}, streaming=False)
    with pytest.raises(errors.InvalidArgument, match="checkImmunitySeconds"):
        parse_sink_options({"endpoints": "h", "checkimmunityseconds": "soon"}, streaming=False)


def test_columns_and_rows() -> None:
    options = parse_sink_options({"endpoints": "h"}, streaming=False)
    check_columns(["body", "topic", "keys"], options)
    with pytest.raises(errors.InvalidArgument, match="column body"):
        check_columns(["value", "topic"], options)
    with pytest.raises(errors.InvalidArgument, match="option topic or a column topic"):
        check_columns(["body"], options)
    with pytest.raises(errors.InvalidArgument, match="does not know columns"):
        check_columns(["body", "topic", "tag"], options)
    message = message_of(
        {"body": "hi", "topic": "col", "keys": "k1 k2", "properties": {"a": 1}, "tags": "t"}, "opt"
    )
    assert (message.topic, message.body, message.keys, dict(message.properties), message.tags) == (
        "opt", b"hi", ("k1", "k2"), {"a": "1"}, "t",
    )  # fmt: skip
    assert message_of({"body": bytearray(b"x"), "topic": "col", "keys": ["a"]}, None).keys == ("a",)
    with pytest.raises(errors.MessageBodyEmpty):
        message_of({"body": None, "topic": "t"}, None)


def test_ledger_urls() -> None:
    assert parse_ledger_url("sqlite:////tmp/a.db").path == "/tmp/a.db"
    pg = parse_ledger_url("postgresql://bank:pw@db.local:6543/ledger")
    assert (pg.jdbc_url, pg.user, pg.password) == ("jdbc:postgresql://db.local:6543/ledger", "bank", "pw")
    for bad in ("mysql://h/db", "sqlite://relative.db", "postgresql://h"):
        with pytest.raises(errors.InvalidArgument):
            parse_ledger_url(bad)


def test_report_counts_examples_and_json() -> None:
    rows = [{"kind": "CREDITED_TWICE", "transfer_id": t} for t in ("t9", "t3")]
    report = build_report({"CREDITED_TWICE": 4}, rows, debits=10, credits=12, published=None)
    assert not report.clean
    assert report.classes[Discrepancy.CREDITED_TWICE].count == 4
    assert [e["transfer_id"] for e in report.classes[Discrepancy.CREDITED_TWICE].examples] == ["t3", "t9"]
    assert report.to_json()["discrepancies"]["CREDITED_TWICE"]["count"] == 4
    assert report.lines()[1] == "CREDITED_TWICE: 4 (e.g. t3, t9)"
    assert build_report({}, [], debits=1, credits=1, published=1).clean


def test_only_the_reported_try_of_a_resent_row_commits() -> None:
    """A re-sent row's earlier tries carry the committed token too; the marker's ``resent`` picks one."""
    marker = Marker("s", "5", frozenset({"t"}), 3, 1, resent={"t": {7: 2}})
    record = SinkRecord.of([Marker.decode(marker.encode())])
    assert record.markers["5"] == marker
    assert verdict_for(HalfTag("s", "5", "t", seq=7, attempt=2), record) is Verdict.COMMIT
    assert verdict_for(HalfTag("s", "5", "t", seq=7, attempt=0), record) is Verdict.ROLLBACK
    assert verdict_for(HalfTag("s", "5", "t", seq=7, attempt=1), record) is Verdict.ROLLBACK
    assert verdict_for(HalfTag("s", "5", "t", seq=8, attempt=0), record) is Verdict.COMMIT
    assert verdict_for(HalfTag("s", "5", "t", seq=8, attempt=1), record) is Verdict.ROLLBACK
    assert verdict_for(HalfTag("s", "5", "t"), record) is Verdict.COMMIT  # a half from before the rule
    assert verdict_for(HalfTag("s", "5", "u", seq=7, attempt=2), record) is Verdict.ROLLBACK


def test_row_tags_travel_in_properties() -> None:
    tag = HalfTag("s", "9", "tok")
    assert tag_of({**tag.properties(0), **row_properties(4, 0)}) == HalfTag("s", "9", "tok", 4, 0)
    assert tag_of({**tag.properties(0), **row_properties(4, 2)}) == HalfTag("s", "9", "tok", 4, 2)
    assert tag_of({**tag.properties(0), SEQ_PROPERTY: "x"}) is None
    assert tag_of({**tag.properties(0), **row_properties(4, 0), TRY_PROPERTY: "-1"}) is None
