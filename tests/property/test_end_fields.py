"""END_TRANSACTION's fast header read agrees with the header class on every set of fields.

``producer.end_fields`` reads the fields the handler needs straight from the request's extFields
and declines (None) anything it does not take without question; the reference is
``EndTransactionRequestHeader.from_ext_fields``. Whenever the fast read answers, the reference
reads the same values (and does not raise); every header a client writes from valid values is
answered by the fast read.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.protocol.remoting.errors import InvalidHeader
from txmq.protocol.remoting.headers import EndTransactionRequestHeader
from txmq.server.remoting.producer import EndFields, end_fields

_WIRE = [
    "producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "msgId", "topic",
    "fromTransactionCheck", "transactionId",
]  # fmt: skip
_RAW = st.sampled_from(
    ["", "0", "8", "12", "007", "-1", "+8", "1" * 18, "9" * 19, "1" * 20, "８", "1 ", " 1", "x", "true",
     "TRUE", "false", "True", "tx-1", "é"]
)  # fmt: skip
_EXT = st.dictionaries(st.sampled_from([*_WIRE, "other"]), _RAW | st.text(max_size=4), max_size=10)


def reference(ext: dict[str, str]) -> EndFields | None:
    try:
        header = EndTransactionRequestHeader.from_ext_fields(ext)
    except InvalidHeader:
        return None
    return EndFields(
        header.commit_or_rollback, header.commit_log_offset, header.msg_id, header.topic or "",
        header.from_transaction_check, header.transaction_id or "",
    )  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(_EXT)
@example({"producerGroup": "g", "tranStateTableOffset": "0", "commitLogOffset": "1", "commitOrRollback": "8",
          "msgId": "m"})  # fmt: skip
@example({"producerGroup": "g", "tranStateTableOffset": "-1", "commitLogOffset": "1", "commitOrRollback": "8",
          "msgId": "m"})  # fmt: skip
def test_the_fast_read_answers_only_what_the_header_class_reads_alike(ext: dict[str, str]) -> None:
    fast = end_fields(ext)
    if fast is not None:
        assert fast == reference(ext)


@settings(max_examples=200, deadline=None)
@given(
    group=st.text(max_size=8),
    table_offset=st.integers(0, 10**18 - 1),
    offset=st.integers(0, 10**18 - 1),
    decision=st.sampled_from([0, 8, 12, 5]),
    msg_id=st.text(max_size=8),
    topic=st.none() | st.text(max_size=8),
    from_check=st.booleans(),
    transaction_id=st.none() | st.text(max_size=8),
)
def test_every_header_a_client_writes_is_read_fast(
    group: str,
    table_offset: int,
    offset: int,
    decision: int,
    msg_id: str,
    topic: str | None,
    from_check: bool,
    transaction_id: str | None,
) -> None:
    ext = EndTransactionRequestHeader(
        producer_group=group, tran_state_table_offset=table_offset, commit_log_offset=offset,
        commit_or_rollback=decision, msg_id=msg_id, topic=topic, from_transaction_check=from_check,
        transaction_id=transaction_id,
    ).to_ext_fields()  # fmt: skip
    fast = end_fields(ext)
    assert fast is not None
    assert fast == reference(ext)
