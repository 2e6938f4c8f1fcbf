"""A commit's real message, spliced from the half's stored properties, is the one ``to_real_topic`` gave.

``reput.committed_fields`` builds the committed message's record fields without a ``PutRequest`` and,
when the half's stored properties are what ``props.encode`` makes of their decoded dict, without copying
and re-encoding that dict (``spliced_properties`` cuts the routing pairs out of the stored bytes and sets
``__transactionId__``). For generated properties (routing keys, a transaction id already there or not,
tags, keys, other names in any order; stored bytes canonical or not), the fields equal what the store
made of ``to_real_topic(...)`` before, byte for byte; and a commit through the broker stores exactly them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.records import keys_of
from txmq.broker.reput import committed_fields, spliced_properties, to_real_topic
from txmq.broker.send import SendContext
from txmq.common import errors, limits, names
from txmq.common import properties as props
from txmq.common.message import Message, SysFlag
from txmq.storage.api import FlushMode, RecordFields, StoredRecord, StoredTuple
from txmq.storage.store import MessageStore

_NAMES = st.sampled_from(
    [
        props.REAL_TOPIC, props.REAL_QUEUE_ID, props.DELAY, props.TRAN_MSG, props.TRANSACTION_ID,
        props.TAGS, props.KEYS, props.UNIQ_KEY, props.PRODUCER_GROUP, "REAL", "REAL_TOPICS", "_TOPIC",
        "a", "é", "user.x",
    ]
)  # fmt: skip
_VALUES = st.text(alphabet=st.sampled_from("ab 1-_é\u4e2d"), max_size=5)
_TXIDS = st.sampled_from(["0A0000012A9F00000000000000001234", "7F000001271100000000000000ABCDEF"])


def _half(properties: bytes, decoded: dict[str, str]) -> StoredRecord:
    return StoredRecord(
        4096, 200, names.HALF_TOPIC, 0, 7, b"body\x00\x01\x02", properties, 1_800_000_000_000, 3,
        int(SysFlag.TRANSACTION_PREPARED), 1_799_999_999_000, "10.0.0.1:4242", 1_800_000_000_001,
        "10.0.0.2:10911", 1, 0,
    )  # fmt: skip


def _before(half: StoredRecord, decoded: dict[str, str], txid: str) -> tuple[str, RecordFields]:
    """What the decision stored before: ``to_real_topic`` with the transaction id, then the store's check."""
    request = to_real_topic(
        half, decoded, sys_flag=SysFlag.TRANSACTION_COMMIT, extra={props.TRANSACTION_ID: txid},
        index_keys=keys_of(decoded),
    )  # fmt: skip
    return MessageStore.fields_of(request)


def _assert_as_before(half: StoredRecord, decoded: dict[str, str], txid: str) -> None:
    """The same fields, or (a real topic the store refuses) the same error from the store's check."""
    try:
        before: tuple[str, RecordFields] | type[Exception] = _before(half, decoded, txid)
    except errors.TxmqError as exc:
        before = type(exc)
    now = committed_fields(StoredTuple.of(half), decoded, txid, keys_of(decoded))
    if isinstance(before, tuple):
        assert now == before
        MessageStore.check_fields(*now)
    else:
        with pytest.raises(before):
            MessageStore.check_fields(*now)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    pairs=st.lists(st.tuples(_NAMES, _VALUES), max_size=12),
    txid=_TXIDS,
    routing_last=st.sampled_from([None, ("Pay", "3", "true"), ("T\u4e2d", "0", "")]),
)
def test_spliced_from_canonical_properties_as_to_real_topic(
    pairs: list[tuple[str, str]], txid: str, routing_last: tuple[str, str, str] | None
) -> None:
    """``routing_last``: the half's routing pairs moved last, in the send path's order (the tail
    ``spliced_properties`` cuts in one piece when neither a delay nor a transaction id is there)."""
    decoded = dict(pairs)
    if routing_last is not None:
        for name, value in zip(
            (props.REAL_TOPIC, props.REAL_QUEUE_ID, props.TRAN_MSG), routing_last, strict=True
        ):
            decoded.pop(name, None)
            decoded[name] = value
    data = props.encode(decoded)
    half = _half(data, decoded)
    assert spliced_properties(data, decoded, txid) is not None  # the splice, not the dict way
    _assert_as_before(half, decoded, txid)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    items=st.lists(
        st.one_of(st.tuples(_NAMES, _VALUES).map(lambda p: f"{p[0]}\x01{p[1]}"), st.just("")), max_size=10
    ),
    trailing=st.booleans(),
    txid=_TXIDS,
)
def test_other_stored_properties_give_what_to_real_topic_gave(
    items: list[str], trailing: bool, txid: str
) -> None:
    """Repeated names, empty pairs, no final separator: decoded alike, stored differently."""
    data = ("\x02".join(items) + ("\x02" if trailing else "")).encode()
    decoded = props.decode(data)
    half = _half(data, decoded)
    _assert_as_before(half, decoded, txid)


def test_a_half_with_the_most_properties_takes_the_dict_way() -> None:
    decoded = {f"p{i}": "v" for i in range(limits.property_count_max)}
    data = props.encode(decoded)
    assert spliced_properties(data, decoded, "T") is None  # the pair added would be one too many


async def test_a_commit_stores_the_message_to_real_topic_made(tmp_path: Path) -> None:
    broker = await Broker.open(BrokerConfig(data_dir=str(tmp_path / "d"), flush=FlushMode.ASYNC))
    try:
        ctx = SendContext(producer_group="PG", born_host="10.0.0.1:4242")
        message = Message(
            "Committed", b"payload", tags="t1", keys=("k1", "k2"), properties={"user.x": "\u4e2d"},
            transactional=True,
        )  # fmt: skip
        (kept,) = await broker.send([message], ctx)
        (read,) = await broker.send([message], ctx)
        broker.transactions._halves.pop(int((read.transaction_id or "")[-16:], 16))  # decided from the log
        expected = []
        for sent in (kept, read):
            txid = sent.transaction_id or ""
            half = broker.store.read(int(txid[-16:], 16))
            expected.append((half.physical_offset, _before(half, props.decode(half.properties), txid)))
            await broker.end_transaction(
                topic="Committed", message_id=sent.message_id, transaction_id=txid, commit=True,
                from_check=False,
            )  # fmt: skip
        stored = sorted(
            (
                r
                for q in broker.store.queues()["Committed"]
                for r in broker.store.read_queue("Committed", q, 0, 9).records
            ),
            key=lambda r: r.physical_offset,
        )
        assert len(stored) == 2
        for record, (half_offset, (topic, fields)) in zip(stored, expected, strict=True):
            assert record.topic == topic == "Committed"
            assert bytes(record.properties) == fields.properties
            assert bytes(record.body) == fields.body == b"payload"
            assert record.prepared_transaction_offset == half_offset
            assert record.tags_code == fields.tags_code
    finally:
        await broker.close()


def test_a_stored_tuple_has_the_stored_records_fields_in_order() -> None:
    """``StoredRecord(*t)`` (a kept half handed to the delayed commit) relies on it."""
    assert StoredTuple._fields == tuple(f.name for f in dataclasses.fields(StoredRecord))
    half = _half(b"a\x01b\x02", {"a": "b"})
    assert StoredRecord(*StoredTuple.of(half)) == half
