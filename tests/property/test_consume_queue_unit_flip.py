"""A ConsumeQueue unit flipped in the middle of its file (any bit of its log offset, size or tags code)
of a real store written by the real broker: ``txmq store verify`` names the unit, and after a restart
consumers read exactly the messages that were written, in order, on every read path: the first read that
reaches the unit finds that its record is not the one the unit names, rebuilds the unit from the log
(the only truth) and reads again; the file is whole again afterwards (verify finds nothing).

That includes a flipped tags code under a tag filter on the pull path (robust4): the filter used to pass
over the unit by its tags code without reading the record, so a matching message was skipped silently
(until verify found it and ``txmq store repair`` rebuilt the queues); the records of filtered-out units
are now read and checked too."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.send import SendContext
from txmq.common.clock import FakeClock
from txmq.common.message import Message
from txmq.protocol.remoting.message_codec import decode_messages
from txmq.server.remoting.convert import PullSink
from txmq.storage.consume_queue import UNIT_BYTES
from txmq.storage.fs import OsFileSystem
from txmq.storage.verify import repair_store, verify_store

from ..pull_oracle import pull_raw

TOPIC, OTHER = "F", "G"
PER_QUEUE = 24
TAGS = ("a", "b")


def _body(queue_id: int, k: int) -> bytes:
    return b"q%d-m%d-" % (queue_id, k) + b"x" * (k * 7 % 50)


async def _write(data_dir: Path) -> None:
    """Two queues of TOPIC interleaved with another topic's messages (so a flipped log offset may land
    on a record of another queue or topic), sent one by one and in batches, by the real broker."""
    broker = await Broker.open(
        BrokerConfig(data_dir=str(data_dir), segment_bytes=64 * 1024), clock=FakeClock()
    )
    try:
        for k in range(0, PER_QUEUE, 4):
            for queue_id in (0, 1):
                ctx = SendContext(producer_group="pg", born_host="10.0.0.1:1", queue_id=queue_id)
                batch = [
                    Message(topic=TOPIC, body=_body(queue_id, j), tags=TAGS[j % 2]) for j in range(k, k + 2)
                ]
                await broker.send(batch, ctx)
                for j in range(k + 2, k + 4):
                    await broker.send([Message(topic=TOPIC, body=_body(queue_id, j), tags=TAGS[j % 2])], ctx)
                await broker.send([Message(topic=OTHER, body=b"other-%d" % k)], ctx)
    finally:
        await broker.close()


_TEMPLATE: list[Path] = []


def _template() -> Path:
    if not _TEMPLATE:
        path = Path(tempfile.mkdtemp(prefix="txmq-cq-flip-")) / "broker"
        asyncio.run(_write(path))
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


def _flip(store: Path, queue_id: int, unit: int, bit: int) -> None:
    (path,) = (store / "consumequeue" / TOPIC / str(queue_id)).iterdir()
    data = bytearray(path.read_bytes())
    assert len(data) == PER_QUEUE * UNIT_BYTES
    data[unit * UNIT_BYTES + bit // 8] ^= 0x80 >> (bit % 8)
    path.write_bytes(bytes(data))


async def _read_all(
    broker: Broker, queue_id: int, path: str, batch: int, expression: str | None
) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while offset < PER_QUEUE:
        if path == "pull":
            result = await broker.pull(
                group="g",
                topic=TOPIC,
                queue_id=queue_id,
                offset=offset,
                batch_size=batch,
                expression=expression,
            )
            bodies += [m.body for m in result.messages]
        elif path == "pull_into":  # the remoting pull's fused path: records straight into the wire body
            sink = PullSink(TOPIC, _no_general)
            result = await broker.pull_into(  # type: ignore[assignment]
                sink,
                group="g",
                topic=TOPIC,
                queue_id=queue_id,
                offset=offset,
                batch_size=batch,
                expression=expression,
            )
            messages = decode_messages(sink.body())
            assert len(messages) == sink.count
            bodies += [
                m.body for m in messages if expression is None or m.properties.get("TAGS") == expression
            ]
        else:
            raw = await pull_raw(
                broker,
                group="g",
                topic=TOPIC,
                queue_id=queue_id,
                offset=offset,
                batch_size=batch,
                expression=expression,
            )
            bodies += [bytes(r[13]) for r in raw.records if expression is None or _tag_of(r) == expression]
            result = raw  # type: ignore[assignment]
        assert result.next_offset > offset
        offset = result.next_offset
    return bodies


def _no_general(physical_offset: int) -> bytes:
    raise AssertionError(f"record at {physical_offset} should not need the general path")


def _tag_of(raw: tuple[object, ...]) -> str:
    properties = bytes(raw[12]).decode()  # type: ignore[arg-type]
    pairs = dict(p.split("\x01", 1) for p in properties.split("\x02") if p)
    return pairs.get("TAGS", "")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    queue_id=st.sampled_from((0, 1)),
    unit=st.integers(0, PER_QUEUE - 1),
    bit=st.integers(0, UNIT_BYTES * 8 - 1),
    path=st.sampled_from(("pull", "pull_raw", "pull_into")),
    batch=st.integers(1, 32),
    tag=st.sampled_from((None, "a", "b")),
)
def test_a_flipped_unit_is_reported_and_consumers_read_exactly_what_was_written(
    queue_id: int, unit: int, bit: int, path: str, batch: int, tag: str | None
) -> None:
    work = Path(tempfile.mkdtemp(prefix="txmq-cq-flip-case-"))
    try:
        data_dir = work / "broker"
        shutil.copytree(_template(), data_dir)
        store = data_dir / "store"
        _flip(store, queue_id, unit, bit)
        report = verify_store(OsFileSystem(), str(store))
        assert not report.problems
        assert [(p.topic, p.queue_id, p.queue_offset) for p in report.queue_problems] == [
            (TOPIC, queue_id, unit)
        ]
        expected = [_body(queue_id, k) for k in range(PER_QUEUE) if tag is None or TAGS[k % 2] == tag]

        async def run() -> None:
            broker = await Broker.open(
                BrokerConfig(data_dir=str(data_dir), segment_bytes=64 * 1024), clock=FakeClock()
            )
            try:
                assert await _read_all(broker, queue_id, path, batch, tag) == expected
                other = 1 - queue_id
                assert await _read_all(broker, other, path, batch, None) == [
                    _body(other, k) for k in range(PER_QUEUE)
                ]
            finally:
                await broker.close()

        asyncio.run(run())
        assert verify_store(OsFileSystem(), str(store)).queue_problems == []  # read, checked, rebuilt
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_flipped_tags_code_is_rebuilt_by_repair(tmp_path: Path) -> None:
    data_dir = tmp_path / "broker"
    shutil.copytree(_template(), data_dir)
    store = data_dir / "store"
    _flip(store, 0, 5, 150)
    assert [p.queue_offset for p in verify_store(OsFileSystem(), str(store)).queue_problems] == [5]
    result = repair_store(OsFileSystem(), str(store), confirm=False)
    assert not result.needs_confirmation and result.records_lost == 0

    async def run() -> list[bytes]:
        broker = await Broker.open(
            BrokerConfig(data_dir=str(data_dir), segment_bytes=64 * 1024), clock=FakeClock()
        )
        try:
            return await _read_all(broker, 0, "pull_raw", 32, "b")
        finally:
            await broker.close()

    assert asyncio.run(run()) == [_body(0, k) for k in range(PER_QUEUE) if k % 2]
    assert verify_store(OsFileSystem(), str(store)).ok


def test_the_rebuild_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data_dir = tmp_path / "broker"
    shutil.copytree(_template(), data_dir)
    _flip(data_dir / "store", 1, 9, 40)  # a bit of the log offset

    async def run() -> None:
        broker = await Broker.open(
            BrokerConfig(data_dir=str(data_dir), segment_bytes=64 * 1024), clock=FakeClock()
        )
        try:
            for _ in range(3):
                assert len(await _read_all(broker, 1, "pull_raw", 32, None)) == PER_QUEUE
        finally:
            await broker.close()

    caplog.set_level(logging.ERROR)
    asyncio.run(run())
    rebuilt = [r.getMessage() for r in caplog.records if "rebuilt from the CommitLog" in r.getMessage()]
    assert rebuilt == [f"ConsumeQueue {TOPIC}/1: units at queue offsets 9-9 did not name their records "
                       "(damaged on disk); rebuilt from the CommitLog"]  # fmt: skip
    assert not [r for r in caplog.records if "txmq store repair" in r.getMessage()]  # not the log's damage


def test_a_flipped_tags_code_under_a_tag_filter_hides_no_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The pull path's tag filter passed over a unit by its tags code unread: a matching message whose
    unit's tags code flipped (here its lowest bit) was skipped, silently. Now every unit's record is
    read and checked; the unit is rebuilt (logged once) and the message delivered."""
    data_dir = tmp_path / "broker"
    shutil.copytree(_template(), data_dir)
    _flip(data_dir / "store", 0, 4, 159)  # unit 4 holds a message tagged "a"

    async def run() -> list[list[bytes]]:
        broker = await Broker.open(
            BrokerConfig(data_dir=str(data_dir), segment_bytes=64 * 1024), clock=FakeClock()
        )
        try:
            return [await _read_all(broker, 0, "pull_raw", 32, "a") for _ in range(2)]
        finally:
            await broker.close()

    caplog.set_level(logging.ERROR)
    assert asyncio.run(run()) == [[_body(0, k) for k in range(0, PER_QUEUE, 2)]] * 2
    rebuilt = [r.getMessage() for r in caplog.records if "rebuilt from the CommitLog" in r.getMessage()]
    assert rebuilt == [f"ConsumeQueue {TOPIC}/0: units at queue offsets 4-4 did not name their records "
                       "(damaged on disk); rebuilt from the CommitLog"]  # fmt: skip
