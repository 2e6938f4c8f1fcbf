"""A kept half's transaction id names the half the parse of that id names.

The remoting door looks an END_TRANSACTION's id up among the kept halves' ids
(``TransactionService.kept_half_offset``) before parsing it: for every id that lookup answers, it
answers what ``msgid.parse_offset_message_id`` reads out of the id, and ``transaction_id_of`` is the
offset message id ``msgid.offset_message_id`` gives. Any other spelling of the id (lower case) is not
found and is parsed as before; a decision takes its half's id out, an evicted half's id goes too. A
committed message names its transaction by the formatted id, whatever the decision's spelling.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.records import split_host
from txmq.broker.send import SendContext
from txmq.common import msgid
from txmq.common import properties as props
from txmq.common.message import Message
from txmq.storage.api import FlushMode


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    host=st.sampled_from(["10.0.0.1:4242", "127.0.0.1:10911", "192.168.255.254:65535", "host:1", "[::1]:9"]),
    offset=st.integers(0, 2**63 - 1) | st.integers(0, 2**32),
)
def test_transaction_id_of_is_the_offset_message_id(host: str, offset: int) -> None:
    name, port = split_host(host)
    prefix = msgid.offset_message_id(name, port, 0)[:16]
    formatted = prefix + "%016X" % offset  # noqa: UP031 - what transaction_id_of formats
    assert formatted == msgid.offset_message_id(name, port, offset)
    parsed = msgid.parse_offset_message_id(formatted)
    assert parsed is not None and parsed[2] == offset


async def test_kept_half_ids_name_what_their_parse_names(tmp_path: Path) -> None:
    broker = await Broker.open(BrokerConfig(data_dir=str(tmp_path / "d"), flush=FlushMode.ASYNC))
    try:
        service = broker.transactions
        ctx = SendContext(producer_group="PG", born_host="10.0.0.1:4242")
        sent = []
        for i in range(5):
            (result,) = await broker.send([Message("Ids", b"x" * (i + 1), transactional=True)], ctx)
            sent.append(result)
        for result in sent:
            txid = result.transaction_id or ""
            parsed = msgid.parse_offset_message_id(txid)
            assert parsed is not None
            assert service.kept_half_offset(txid) == parsed[2]
            assert service.transaction_id_of(parsed[2]) == txid
            assert service.kept_half_offset(txid.lower()) == -1  # another spelling: parsed
        first = sent[0].transaction_id or ""
        await broker.end_transaction(
            topic="Ids", message_id=sent[0].message_id, transaction_id=first, commit=True, from_check=False
        )
        assert service.kept_half_offset(first) == -1  # the decision took it
        lower = (sent[1].transaction_id or "").lower()
        await broker.end_transaction(
            topic="Ids", message_id=sent[1].message_id, transaction_id=lower, commit=True, from_check=False
        )
        # the committed messages name their transaction by the id the broker formats, whatever the
        # spelling the decision came with (the first's was taken from the memo, the second's formatted)
        committed = {
            r.body: props.decode(r.properties)[props.TRANSACTION_ID]
            for queue_id in broker.store.queues()["Ids"]
            for r in broker.store.read_queue("Ids", queue_id, 0, 10).records
        }
        assert committed == {b"x": first, b"xx": sent[1].transaction_id}
        assert len(service._half_ids) == 4  # taken under another spelling: its id stays, a memo only
        service._halves_max = 1  # read at start (limits.transaction_half_cache_max)
        (last,) = await broker.send([Message("Ids", b"y", transactional=True)], ctx)
        assert list(service._halves) == [service.kept_half_offset(last.transaction_id or "")]
        assert all(service.kept_half_offset(r.transaction_id or "") == -1 for r in sent[2:])  # evicted
    finally:
        await broker.close()


async def test_transaction_id_of_formats_every_offset_as_the_percent_format(tmp_path: Path) -> None:
    """``transaction_id_of`` renders a log offset by its bytes' ``hex()`` (below ``2**62``) and by
    ``%016X`` otherwise: the prefix and ``%016X`` of the offset either way (offsets at and around the
    fast path's bound, past 2**63, at 2**64 and beyond, and negative ones)."""
    broker = await Broker.open(BrokerConfig(data_dir=str(tmp_path / "d"), flush=FlushMode.ASYNC))
    try:
        service = broker.transactions
        prefix = service.transaction_id_of(0)[:16]
        edges = [0, 1, 15, 16, 2**32, 2**62 - 2, 2**62 - 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70]
        for offset in edges + [-1, -(2**62), -(2**70)] + [(7**k) % 2**64 for k in range(60)]:
            assert service.transaction_id_of(offset) == prefix + "%016X" % offset  # noqa: UP031
    finally:
        await broker.close()
