"""Drive one :class:`Driver` through one :class:`Workload` and measure it.

Clock: ``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux), shared by producers and consumers in this
process, so the timestamp in each payload gives end-to-end latency without clock skew.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field

from benchmarks.harness.cpu import CpuMeter
from benchmarks.harness.driver import Consumer, Driver, Producer
from benchmarks.harness.stats import summarize_ns
from benchmarks.harness.workload import Workload

_STAMP = struct.Struct("<q")
_NS = 1_000_000_000
_DRAIN_TIMEOUT_NS = 60 * _NS  # a give-up limit: the drain returns once every acked message is consumed
_PRELOAD_BATCH = 100
_PRELOAD_IN_FLIGHT = 4


@dataclass
class _Recorder:
    """Counts and latency samples; only requests sent inside the measured window are sampled."""

    measure_from: int
    deadline: int
    acked_total: int = 0
    acked_in_window: int = 0
    consumed_total: int = 0
    publish_ns: list[int] = field(default_factory=list)
    e2e_ns: list[int] = field(default_factory=list)

    def on_ack(self, sent: int, done: int, count: int) -> None:
        self.acked_total += count
        if self.measure_from <= done <= self.deadline:
            self.acked_in_window += count
        if sent >= self.measure_from:
            self.publish_ns.append(done - sent)

    def on_receive(self, payloads: Sequence[bytes], now: int) -> None:
        self.consumed_total += len(payloads)
        for payload in payloads:
            (sent,) = _STAMP.unpack_from(payload)
            if sent >= self.measure_from:
                self.e2e_ns.append(now - sent)


@dataclass
class SlotOutcome:
    """What one producer slot counted: all acks, acks inside the window, publish latencies sampled."""

    acked_total: int
    acked_in_window: int
    publish_ns: list[int]


def _payload(stamp: int, pad: bytes) -> bytes:
    return _STAMP.pack(stamp) + pad


async def _produce_slot(
    producer: Producer, workload: Workload, rec: _Recorder, first_queue: int, interval_ns: int
) -> None:
    """One outstanding request at a time, paced at ``interval_ns`` between requests if > 0.

    A slot stops at the deadline only once it has sent a request inside the window: on a loaded host a
    request sent during warmup can be acked after the deadline, and a slot that stopped then would leave
    no latency sample at all (the result would say None instead of "slow").
    """
    pad = bytes(workload.message_bytes - _STAMP.size)
    queue = first_queue % workload.queues
    next_at = time.perf_counter_ns()
    sampled = False
    while True:
        now = time.perf_counter_ns()
        if now >= rec.deadline and sampled:
            return
        if interval_ns:
            if next_at > now:
                await asyncio.sleep((next_at - now) / _NS)
                now = time.perf_counter_ns()
            next_at += interval_ns
        payload = _payload(now, pad)
        await producer.send(queue, [payload] * workload.batch)
        rec.on_ack(now, time.perf_counter_ns(), workload.batch)
        sampled = sampled or now >= rec.measure_from
        queue = (queue + 1) % workload.queues


async def _run_slot(
    producer: Producer, workload: Workload, rec: _Recorder, first_queue: int, interval_ns: int
) -> None:
    """A slot whose loop runs where the producer runs (see ``SelfDrivingProducer``), merged into ``rec``."""
    run_slot = producer.run_slot  # type: ignore[attr-defined]
    outcome: SlotOutcome = await run_slot(first_queue, workload, rec.measure_from, rec.deadline, interval_ns)
    rec.acked_total += outcome.acked_total
    rec.acked_in_window += outcome.acked_in_window
    rec.publish_ns.extend(outcome.publish_ns)


async def drive_slot(
    producer: Producer,
    workload: Workload,
    first_queue: int,
    measure_from: int,
    deadline: int,
    interval_ns: int,
) -> SlotOutcome:
    """Run one slot's loop (the same code as in the harness process) and report what it counted."""
    rec = _Recorder(measure_from=measure_from, deadline=deadline)
    await _produce_slot(producer, workload, rec, first_queue, interval_ns)
    return SlotOutcome(rec.acked_total, rec.acked_in_window, rec.publish_ns)


async def _consume_loop(consumer: Consumer, batch: int, rec: _Recorder, stop: asyncio.Event) -> None:
    while not stop.is_set():
        payloads = await consumer.receive(batch)
        if payloads:
            rec.on_receive(payloads, time.perf_counter_ns())


async def _drain(rec: _Recorder, target: int, timeout_ns: int) -> None:
    """Wait (polling cheaply) until consumers have seen ``target`` messages or the timeout passes."""
    give_up = time.perf_counter_ns() + timeout_ns
    while rec.consumed_total < target and time.perf_counter_ns() < give_up:
        await asyncio.sleep(0.01)


def _interval_ns(workload: Workload) -> int:
    if workload.target_rate is None:
        return 0
    slots = workload.producers * workload.in_flight
    return int(_NS * workload.batch * slots / workload.target_rate)


async def _run_produce(
    driver: Driver, workload: Workload, producers: list[Producer], consumers: list[Consumer]
) -> dict[str, object]:
    start = time.perf_counter_ns()
    measure_from = start + int(workload.warmup_s * _NS)
    rec = _Recorder(measure_from=measure_from, deadline=measure_from + int(workload.duration_s * _NS))
    stop = asyncio.Event()
    readers = [asyncio.create_task(_consume_loop(c, workload.consume_batch, rec, stop)) for c in consumers]
    interval = _interval_ns(workload)
    slots = [
        asyncio.create_task(_slot_of(p)(p, workload, rec, i * workload.in_flight + s, interval))
        for i, p in enumerate(producers)
        for s in range(workload.in_flight)
    ]
    cpu = CpuMeter(driver.server_pids(), _client_pids(driver))
    try:
        await asyncio.sleep(max(0, measure_from - time.perf_counter_ns()) / _NS)
        cpu.start()
        await asyncio.gather(*slots)
        cpu_pct = cpu.stop()
        if readers:
            await _drain(rec, rec.acked_total, _DRAIN_TIMEOUT_NS)
    finally:
        stop.set()
        for task in slots:
            task.cancel()
        await asyncio.gather(*slots, *readers, return_exceptions=True)
    window_s = workload.duration_s
    return {
        "throughput_msg_s": rec.acked_in_window / window_s,
        "window_s": window_s,
        "acked_messages": rec.acked_total,
        "consumed_messages": rec.consumed_total,
        "publish_latency": summarize_ns(rec.publish_ns),
        "e2e_latency": summarize_ns(rec.e2e_ns),
        "cpu": cpu_pct,
    }


async def _preload(producers: list[Producer], workload: Workload) -> None:
    """Store ``workload.preload_messages`` messages as fast as the driver allows (not measured)."""
    pad = bytes(workload.message_bytes - _STAMP.size)
    left = [workload.preload_messages]  # shared by the slots; no await between check and take

    async def slot(producer: Producer, queue: int) -> None:
        while left[0] > 0:
            n = min(_PRELOAD_BATCH, left[0])
            left[0] -= n
            await producer.send(queue % workload.queues, [_payload(time.perf_counter_ns(), pad)] * n)
            queue += 1

    width = _PRELOAD_IN_FLIGHT
    await asyncio.gather(*(slot(p, i * width + s) for i, p in enumerate(producers) for s in range(width)))


async def _run_consume(
    driver: Driver, workload: Workload, producers: list[Producer], consumers: list[Consumer]
) -> dict[str, object]:
    await _preload(producers, workload)
    start = time.perf_counter_ns()
    rec = _Recorder(measure_from=start, deadline=start + int(workload.duration_s * _NS))
    stop = asyncio.Event()
    cpu = CpuMeter(driver.server_pids(), _client_pids(driver))
    cpu.start()
    readers = [asyncio.create_task(_consume_loop(c, workload.consume_batch, rec, stop)) for c in consumers]
    try:
        await _drain(rec, workload.preload_messages, rec.deadline - start)
        elapsed_s = (time.perf_counter_ns() - start) / _NS
        cpu_pct = cpu.stop()
    finally:
        stop.set()
        await asyncio.gather(*readers, return_exceptions=True)
    return {
        "throughput_msg_s": rec.consumed_total / elapsed_s,
        "window_s": elapsed_s,
        "acked_messages": workload.preload_messages,
        "consumed_messages": rec.consumed_total,
        "publish_latency": None,
        "e2e_latency": None,
        "cpu": cpu_pct,
    }


def _slot_of(
    producer: Producer,
) -> Callable[[Producer, Workload, _Recorder, int, int], Coroutine[object, object, None]]:
    """A producer with ``run_slot`` runs its slot's loop itself (a worker process: no relay per request)."""
    return _run_slot if callable(getattr(producer, "run_slot", None)) else _produce_slot


def _client_pids(driver: Driver) -> list[int]:
    """Optional ``client_pids()``: a driver's helper processes on the client side (see driver.py)."""
    extra = getattr(driver, "client_pids", None)
    return list(extra()) if callable(extra) else []


def _queues_for(index: int, workload: Workload) -> list[int]:
    """Consumer ``index`` reads every queue q with q % consumers == index (all queues are covered)."""
    return [q for q in range(workload.queues) if q % workload.consumers == index]


async def _measure(driver: Driver, workload: Workload) -> dict[str, object]:
    producers: list[Producer] = []
    consumers: list[Consumer] = []
    try:
        for i in range(workload.consumers):
            consumers.append(await driver.consumer(i, _queues_for(i, workload)))
        for i in range(workload.producers):
            producers.append(await driver.producer(i))
        if workload.is_consume:
            return await _run_consume(driver, workload, producers, consumers)
        return await _run_produce(driver, workload, producers, consumers)
    finally:
        for producer in producers:
            await producer.close()
        for consumer in consumers:
            await consumer.close()


async def run_workload(driver: Driver, workload: Workload) -> dict[str, object]:
    """Run one workload on one driver and return a JSON-ready result (``status`` ok / n/a / error)."""
    info = driver.describe()
    result: dict[str, object] = {
        "system": info.system,
        "workload": workload.name,
        "driver": info.to_dict(),
        "spec": workload.to_dict(),
    }
    reason = driver.supports(workload)
    if reason is not None:
        return {**result, "status": "n/a", "reason": reason}
    try:
        try:
            await driver.setup(workload)
            measured = await _measure(driver, workload)
        finally:
            await driver.teardown()  # drivers tolerate a partial setup
    except Exception as exc:
        return {**result, "status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    result["driver"] = driver.describe().to_dict()  # again: server versions are known after setup
    return {**result, "status": "ok", **measured}
