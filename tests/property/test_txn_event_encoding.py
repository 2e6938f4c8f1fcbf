"""``TxnEvent.encode`` writes the document ``json.dumps`` writes (the reference below), for any event."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from txmq.broker.transaction.history import ENCODING_VERSION, EventKind, TxnEvent
from txmq.broker.transaction.model import Decision, DecisionSource


def reference(event: TxnEvent) -> bytes:
    doc: dict[str, Any] = {
        "v": ENCODING_VERSION,
        "kind": event.kind.value,
        "txid": event.transaction_id,
        "at": event.at_ms,
    }
    if event.source is not None:
        doc["source"] = event.source.value
    if event.producer_client_id is not None:
        doc["client"] = event.producer_client_id
    if event.decision is not None:
        doc["decision"] = event.decision.value
    if event.detail:
        doc["detail"] = event.detail
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


_TEXT = st.text() | st.sampled_from(["", "7F0000010000270F0000000000001A2B", '"\\\n\x00é☃', "127.0.0.1:5555"])

events = st.builds(
    TxnEvent,
    kind=st.sampled_from(EventKind),
    transaction_id=_TEXT,
    at_ms=st.integers(-(2**63), 2**63 - 1),
    source=st.none() | st.sampled_from(DecisionSource),
    producer_client_id=st.none() | _TEXT,
    decision=st.none() | st.sampled_from(Decision),
    detail=_TEXT,
)


@given(events)
def test_encode_is_the_json_document(event: TxnEvent) -> None:
    data = event.encode()
    assert data == reference(event)
    assert TxnEvent.decode(data) == event
