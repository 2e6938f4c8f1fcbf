"""A ConsumeQueue unit flipped on disk (any bit of its log offset, size or tags code) under the broker's
own scans, which used to act on a unit without holding its record to it (robust4; durable3 covered
pull and unfiltered receive):

- the transaction check cursor (HALF topic: the tags code is the half's store time),
- a delay level's cursor (SCHEDULE topic: the tags code is the delivery time),
- a timer bucket (delivery timestamps: the same),
- POP receive with a tag filter, and FIFO receive (the tags code filtered on before the record is read).

Before, a flipped unit meant a half never checked or another half checked twice, a delayed message lost
("poison", skipped), delivered twice, delivered early or blocking its level for good, and a receive that
skipped a matching message. Each store here is written by the real broker; after the flip and a restart
every message comes out exactly as written, and ``txmq store verify`` is clean afterwards (rebuilt)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.broker.config import BrokerConfig
from txmq.broker.send import SendContext
from txmq.common import names
from txmq.common.clock import FakeClock
from txmq.common.message import Message
from txmq.storage.consume_queue import UNIT_BYTES
from txmq.storage.fs import OsFileSystem
from txmq.storage.verify import verify_store

from ..broker.conftest import RecordingChannel

COUNT = 8
START_MS = 1_800_000_000_000
CTX = SendContext(producer_group="pg", born_host="10.0.0.1:1", queue_id=0)
SETTINGS = settings(
    max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
UNIT = st.integers(0, COUNT - 1)
BIT = st.integers(0, UNIT_BYTES * 8 - 1)


def _config(data_dir: Path) -> BrokerConfig:
    return BrokerConfig(
        data_dir=str(data_dir),
        segment_bytes=64 * 1024,
        transaction_timeout_ms=6_000,
        transaction_check_interval_ms=60_000,
        receive_invisible_ms_min=1_000,
    )


def _body(k: int) -> bytes:
    return b"m%d-" % k + b"x" * (k * 7 % 40)


async def _write_half(broker: Broker, k: int) -> None:
    await broker.send([Message(topic="pay", body=_body(k), transactional=True)], CTX)


async def _write_level(broker: Broker, k: int) -> None:
    broker.clock.advance(10)  # type: ignore[attr-defined]
    await broker.send([Message(topic="d", body=_body(k), delay_level=2)], CTX)  # 5 s


async def _write_timer(broker: Broker, k: int) -> None:
    await broker.send([Message(topic="d", body=_body(k), delivery_timestamp_ms=START_MS + 30_000 + k)], CTX)


async def _write_tagged(broker: Broker, k: int) -> None:
    group = "AB"[k % 3 % 2]  # FIFO message groups A and B
    message = Message(topic="F", body=_body(k), tags="ab"[k % 2], message_group=group)
    await broker.send([message], CTX)


_TEMPLATES: dict[str, Path] = {}


def _template(kind: str, write: Callable[[Broker, int], Awaitable[None]]) -> Path:
    """A store the real broker wrote: COUNT messages of ``kind``, interleaved with another topic's (so a
    flipped log offset may land on a record of another topic)."""
    if kind not in _TEMPLATES:
        path = Path(tempfile.mkdtemp(prefix=f"txmq-scan-flip-{kind}-")) / "broker"

        async def run() -> None:
            broker = await Broker.open(_config(path), clock=FakeClock(start_ms=START_MS))
            try:
                broker.topics.create("F", queues=1)
                for k in range(COUNT):
                    await write(broker, k)
                    await broker.send([Message(topic="other", body=b"other-%d" % k)], CTX)
            finally:
                await broker.close()

        asyncio.run(run())
        _TEMPLATES[kind] = path
    return _TEMPLATES[kind]


def _flip(store: Path, topic: str, unit: int, bit: int) -> None:
    """Flip ``bit`` of the ``unit``-th unit of the one non-empty ConsumeQueue of ``topic``."""
    files = [p for q in (store / "consumequeue" / topic).iterdir() for p in q.iterdir() if p.stat().st_size]
    (path,) = files
    data = bytearray(path.read_bytes())
    assert len(data) == COUNT * UNIT_BYTES
    data[unit * UNIT_BYTES + bit // 8] ^= 0x80 >> (bit % 8)
    path.write_bytes(bytes(data))


def _run_flipped(
    kind: str,
    write: Callable[[Broker, int], Awaitable[None]],
    topic: str,
    unit: int,
    bit: int,
    check: Callable[[Broker, FakeClock], Awaitable[None]],
) -> None:
    work = Path(tempfile.mkdtemp(prefix="txmq-scan-flip-case-"))
    try:
        data_dir = work / "broker"
        shutil.copytree(_template(kind, write), data_dir)
        store = data_dir / "store"
        _flip(store, topic, unit, bit)
        assert [p.queue_offset for p in verify_store(OsFileSystem(), str(store)).queue_problems] == [unit]

        async def run() -> None:
            clock = FakeClock(start_ms=START_MS + 1_000)
            broker = await Broker.open(_config(data_dir), clock=clock)
            try:
                await check(broker, clock)
            finally:
                await broker.close()

        asyncio.run(run())
        assert verify_store(OsFileSystem(), str(store)).queue_problems == []
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _tick_to(broker: Broker, clock: FakeClock, at_ms: int, step_ms: int = 500) -> None:
    while clock.now_ms() < at_ms:
        clock.advance(min(step_ms, at_ms - clock.now_ms()))
        await broker.tick(clock.now_ms())


async def _receive_all(broker: Broker, group: str, topic: str, expression: str = "*") -> list[bytes]:
    bodies: list[bytes] = []
    while True:
        got = await broker.receive(
            group=group, topic=topic, expression=expression, batch_size=3, invisible_ms=60_000, long_poll_ms=0
        )
        if not got:
            return bodies
        for view in got:
            bodies.append(view.body)
            broker.ack(group=group, receipt_handle=view.receipt_handle or "")


@SETTINGS
@given(unit=UNIT, bit=BIT)
def test_the_transaction_cursor_checks_every_half_once(unit: int, bit: int) -> None:
    async def check(broker: Broker, clock: FakeClock) -> None:
        channel = RecordingChannel()
        broker.clients.touch("p1", kind=ClientKind.PRODUCER, groups={"pg"}, channel=channel)
        await _tick_to(broker, clock, START_MS + 5_000)
        assert channel.checks == []  # not due before the transaction timeout
        await _tick_to(broker, clock, START_MS + 8_000)
        assert sorted(view.body for view, _ in channel.checks) == [_body(k) for k in range(COUNT)]

    _run_flipped("half", _write_half, names.HALF_TOPIC, unit, bit, check)


@SETTINGS
@given(unit=UNIT, bit=BIT)
def test_a_delay_level_delivers_every_message_once_when_due(unit: int, bit: int) -> None:
    async def check(broker: Broker, clock: FakeClock) -> None:
        await _tick_to(broker, clock, START_MS + 5_000)
        assert await _receive_all(broker, "g", "d") == []  # due at START + 5 s + 10..80 ms
        await _tick_to(broker, clock, START_MS + 8_000)
        assert await _receive_all(broker, "g", "d") == [_body(k) for k in range(COUNT)]
        await _tick_to(broker, clock, START_MS + 20_000)
        assert await _receive_all(broker, "g2", "d") == [_body(k) for k in range(COUNT)]  # once each

    _run_flipped("level", _write_level, names.SCHEDULE_TOPIC, unit, bit, check)


@SETTINGS
@given(unit=UNIT, bit=BIT)
def test_a_timer_bucket_delivers_every_message_once_when_due(unit: int, bit: int) -> None:
    async def check(broker: Broker, clock: FakeClock) -> None:
        await _tick_to(broker, clock, START_MS + 29_500)
        assert await _receive_all(broker, "g", "d") == []
        await _tick_to(broker, clock, START_MS + 32_000)
        assert sorted(await _receive_all(broker, "g", "d")) == sorted(_body(k) for k in range(COUNT))
        await _tick_to(broker, clock, START_MS + 90_000, step_ms=5_000)
        assert sorted(await _receive_all(broker, "g2", "d")) == sorted(_body(k) for k in range(COUNT))

    _run_flipped("timer", _write_timer, names.TIMER_TOPIC, unit, bit, check)


@SETTINGS
@given(unit=UNIT, bit=BIT, tag=st.sampled_from(("a", "b", "*")), fifo=st.booleans())
def test_a_filtered_or_fifo_receive_gets_every_matching_message(
    unit: int, bit: int, tag: str, fifo: bool
) -> None:
    async def check(broker: Broker, clock: FakeClock) -> None:
        if fifo:
            broker.set_group_policy("g", fifo=True)
        expected = [_body(k) for k in range(COUNT) if tag == "*" or "ab"[k % 2] == tag]
        got = await _receive_all(broker, "g", "F", tag)
        assert sorted(got) == sorted(expected)
        assert await _receive_all(broker, "g", "F", tag) == []

    _run_flipped("tagged", _write_tagged, "F", unit, bit, check)
