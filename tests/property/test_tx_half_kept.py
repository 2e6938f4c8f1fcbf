"""The half message the transaction service keeps from its send is the one the log holds.

``TransactionService.half_stored`` builds, from the send path's request and append result, the record
``MessageStore.read`` returns for a half message; END_TRANSACTION then decides from it without a log read.
For generated transactional messages (bodies, tags, keys, user properties, delays, check immunity), the
kept record and properties equal what the log returns, and a decision taken from the kept half writes the
same records as one taken after reading it back (the read path, still used when nothing is kept).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.records import index_keys
from txmq.broker.send import SendContext
from txmq.common import limits, names
from txmq.common import properties as props
from txmq.common.clock import FakeClock
from txmq.common.message import Message
from txmq.storage.api import FlushMode, StoredRecord

_TEXT = st.text(alphabet=st.sampled_from("ab |-_é"), min_size=0, max_size=6)
_IDS = itertools.count(1)
_USER = st.dictionaries(st.sampled_from(["a", "b", "user.x", "WAIT"]), _TEXT, max_size=3)


@pytest.fixture(scope="module")
def brokers(loop: asyncio.AbstractEventLoop) -> Iterator[tuple[Broker, Broker]]:
    """Two brokers, one clock: ``kept`` decides from the kept half, ``read`` from the log."""
    clock = FakeClock(start_ms=1_800_000_000_000)
    with tempfile.TemporaryDirectory() as tmp:

        async def open_one(name: str) -> Broker:
            config = BrokerConfig(data_dir=str(Path(tmp) / name), flush=FlushMode.SYNC)
            return await Broker.open(config, clock=clock)

        pair = (loop.run_until_complete(open_one("kept")), loop.run_until_complete(open_one("read")))
        yield pair
        for broker in pair:
            loop.run_until_complete(broker.close())


def _fields(record: StoredRecord) -> tuple[object, ...]:
    return (
        record.physical_offset, record.size, record.topic, record.queue_id, record.queue_offset,
        bytes(record.body), bytes(record.properties), record.tags_code, record.flag, record.sys_flag,
        record.born_timestamp_ms, record.born_host, record.store_timestamp_ms, record.store_host,
        record.reconsume_times, record.prepared_transaction_offset,
    )  # fmt: skip


def _message(
    body: bytes, tags: str | None, keys: tuple[str, ...], user: dict[str, str], delay: int, message_id: str
) -> Message:
    return Message(
        topic="KeptPay", body=body, tags=tags, keys=keys, properties=user, transactional=True,
        delay_level=delay or None, check_immunity_s=30 if delay == 2 else None, message_id=message_id,
    )  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.sampled_from([b"x", b"body" * 64, bytes(range(256))]),
    tags=st.sampled_from([None, "t", "tag-1"]),
    keys=st.sampled_from([(), ("k1",), ("k1", "k2")]),
    user=_USER,
    delay=st.sampled_from([0, 0, 0, 2]),
    group=st.sampled_from(["PG", ""]),
    commit=st.sampled_from([True, True, False]),
)
def test_kept_half_is_the_stored_half_and_decides_alike(
    brokers: tuple[Broker, Broker],
    loop: asyncio.AbstractEventLoop,
    body: bytes,
    tags: str | None,
    keys: tuple[str, ...],
    user: dict[str, str],
    delay: int,
    group: str,
    commit: bool,
) -> None:
    kept_broker, read_broker = brokers
    ctx = SendContext(producer_group=group or None, born_host="10.0.0.1:4242")
    message = _message(body, tags, keys, user, delay, f"ID{next(_IDS):032X}")
    written = []
    for broker in brokers:
        (result,) = loop.run_until_complete(broker.send([message], ctx))
        assert result.transaction_id is not None
        written.append(result)
    offset = int(written[0].transaction_id[-16:], 16)  # type: ignore[index]

    service = kept_broker.transactions
    half, decoded, _ = service._halves[offset]
    stored = kept_broker.store.read(offset)
    assert half.topic == names.HALF_TOPIC
    assert _fields(half) == _fields(stored)
    assert decoded == props.decode(stored.properties)

    read_offset = int(written[1].transaction_id[-16:], 16)  # type: ignore[index]
    read_broker.transactions._halves.pop(read_offset)  # this one decides the general way
    for broker, result in zip(brokers, written, strict=True):
        decide = broker.end_transaction(
            topic="KeptPay", message_id=result.message_id, transaction_id=result.transaction_id or "",
            commit=commit, from_check=False,
        )  # fmt: skip
        loop.run_until_complete(decide)
    assert offset not in service._halves  # the decision took it
    logs = [_log(broker) for broker in brokers]
    assert logs[0] == logs[1]  # byte for byte the same history: half, op record, committed message
    _assert_indexed(kept_broker, offset)


def _assert_indexed(broker: Broker, since: int) -> None:
    """Every key the store's general keys function finds in a record since ``since`` finds the record
    (the decision hands its records' keys to the dispatcher instead of having them decoded again)."""
    offset = since
    while offset < broker.store.max_physical_offset:
        record = broker.store.read(offset)
        for key in index_keys(record.topic, record.properties):
            found = broker.store.query_by_key(key, 1000)
            assert record.physical_offset in [r.physical_offset for r in found], (record.topic, key)
        offset += record.size


def _log(broker: Broker) -> list[tuple[object, ...]]:
    """Every record of the broker's CommitLog (but the generated message ids), oldest first."""
    records, offset = [], broker.store.min_physical_offset
    while offset < broker.store.max_physical_offset:
        record = broker.store.read(offset)
        records.append(_fields(record))
        offset += record.size
    return records


async def test_kept_halves_are_bounded(tmp_path: Path) -> None:
    broker = await Broker.open(BrokerConfig(data_dir=str(tmp_path / "d"), flush=FlushMode.ASYNC))
    try:
        ctx = SendContext(producer_group="PG", born_host="10.0.0.1:4242")
        first = None
        for _ in range(limits.transaction_half_cache_max + 3):
            (result,) = await broker.send([Message("Bounded", b"x", transactional=True)], ctx)
            first = first or result
        kept = broker.transactions._halves
        assert len(kept) == limits.transaction_half_cache_max
        assert first is not None and first.transaction_id is not None
        oldest = int(first.transaction_id[-16:], 16)
        assert oldest not in kept  # forgotten first; its decision reads the log
        await broker.end_transaction(
            topic="Bounded", message_id=first.message_id, transaction_id=first.transaction_id, commit=True,
            from_check=False,
        )  # fmt: skip
        got = broker.store.read_queue("Bounded", first.queue.queue_id, 0, 10).records
        assert [r.body for r in got] == [b"x"]
    finally:
        await broker.close()


async def test_kept_halves_are_bounded_in_bytes(tmp_path: Path) -> None:
    broker = await Broker.open(BrokerConfig(data_dir=str(tmp_path / "d"), flush=FlushMode.ASYNC))
    try:
        ctx = SendContext(producer_group="PG", born_host="10.0.0.1:4242")
        service = broker.transactions
        service._halves_bytes_max = 10 * 1024  # limits.transaction_half_cache_bytes_max, read at start
        sent = []
        for body in (b"a" * 3000, b"b" * 3000, b"c" * 3000, b"d" * 3000, b"e" * 20_000, b"f" * 10):
            (result,) = await broker.send([Message("BoundedBytes", body, transactional=True)], ctx)
            sent.append(result)
            kept = service._halves.values()
            assert service._halves_bytes == sum(len(h.body) + len(h.properties) for h, _, _ in kept)
            assert service._halves_bytes <= 10 * 1024
        assert [h.body[:1] for h, _, _ in service._halves.values()] == [b"b", b"c", b"d", b"f"]  # e: too big
        for result in sent:
            txid = result.transaction_id or ""
            decide = broker.end_transaction(
                topic="BoundedBytes", message_id=result.message_id, transaction_id=txid, commit=True,
                from_check=False,
            )  # fmt: skip
            await decide
        assert service._halves_bytes == 0 and not service._halves
        bodies = [
            r.body[:1]
            for queue_id in broker.store.queues()["BoundedBytes"]
            for r in broker.store.read_queue("BoundedBytes", queue_id, 0, 10).records
        ]
        assert sorted(bodies) == [b"a", b"b", b"c", b"d", b"e", b"f"]  # kept or read back alike
    finally:
        await broker.close()
