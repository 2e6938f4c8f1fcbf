"""RabbitMQ (the shared service at 127.0.0.1:5672) with durable classic or quorum queues.

Client: aiormq, the AMQP 0-9-1 protocol layer under aio-pika; it costs less Python per message than
aio-pika's wrappers (about 1.4x the consume rate here), so RabbitMQ is not handicapped by its client.

Produce: persistent messages to the default exchange; each message awaits its publisher confirm (the
runner's in-flight requests form the confirm window; a batch is published together and all confirms
awaited). Transactional workloads use an AMQP ``tx.select`` channel: publish the batch, ``tx.commit``.
Consume: basic.consume with prefetch, one ``basic.ack(multiple=True)`` per batch returned.
Queues get unique names and are deleted at teardown.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from collections.abc import Sequence
from importlib import metadata

import aiormq
from aiormq.abc import AbstractChannel, AbstractConnection, DeliveredMessage
from pamqp.commands import Basic

from benchmarks.harness.cpu import find_pids
from benchmarks.harness.driver import Consumer, DriverInfo, Producer
from benchmarks.harness.workload import Workload

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
_RECEIVE_WAIT_S = 0.05
_PERSISTENT = Basic.Properties(delivery_mode=2)


class _ConfirmProducer:
    def __init__(self, conn: AbstractConnection, channel: AbstractChannel, queues: list[str]) -> None:
        self._conn = conn
        self._channel = channel
        self._queues = queues

    async def _publish(self, key: str, payload: bytes) -> None:
        await self._channel.basic_publish(payload, routing_key=key, properties=_PERSISTENT)

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        key = self._queues[queue]
        if len(payloads) == 1:
            await self._publish(key, payloads[0])
        else:
            await asyncio.gather(*(self._publish(key, p) for p in payloads))

    async def close(self) -> None:
        await self._conn.close()


class _TxProducer(_ConfirmProducer):
    """A channel in AMQP tx mode: the batch is durable once ``tx.commit`` returns."""

    def __init__(self, conn: AbstractConnection, channel: AbstractChannel, queues: list[str]) -> None:
        super().__init__(conn, channel, queues)
        self._lock = asyncio.Lock()  # a tx channel commits everything published on it: one at a time

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        async with self._lock:
            await super().send(queue, payloads)
            await self._channel.tx_commit()


class _RabbitConsumer:
    def __init__(self, conn: AbstractConnection, channel: AbstractChannel, queues: list[str]) -> None:
        self._conn = conn
        self._channel = channel
        self._queues = queues
        self._inbox: collections.deque[DeliveredMessage] = collections.deque()
        self._arrived = asyncio.Event()
        self._started = False

    async def _on_message(self, message: DeliveredMessage) -> None:
        self._inbox.append(message)
        self._arrived.set()

    async def _start(self) -> None:
        """Consume lazily, so preloaded messages are not pushed to us before the measured drain."""
        self._started = True
        for name in self._queues:
            await self._channel.basic_consume(name, self._on_message)

    async def receive(self, max_messages: int) -> list[bytes]:
        if not self._started:
            await self._start()
        if not self._inbox:
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), _RECEIVE_WAIT_S)
            if not self._inbox:
                return []
        take = min(max_messages, len(self._inbox))
        messages = [self._inbox.popleft() for _ in range(take)]
        # Deliveries arrive in tag order, so acking the last one with multiple=True covers exactly these.
        tag = messages[-1].delivery_tag
        assert tag is not None
        await self._channel.basic_ack(tag, multiple=True)
        return [m.body for m in messages]

    async def close(self) -> None:
        await self._conn.close()


class RabbitMQDriver:
    def __init__(self, queue_type: str = "quorum", url: str = DEFAULT_URL) -> None:
        if queue_type not in ("quorum", "classic"):
            raise ValueError("queue_type must be 'quorum' or 'classic'")
        self._type = queue_type
        self._url = url
        self._queues: list[str] = []
        self._workload: Workload | None = None
        self._version = "?"

    def describe(self) -> DriverInfo:
        return DriverInfo(
            system=f"rabbitmq-{self._type}",
            product=f"RabbitMQ {self._version}, durable {self._type} queue",
            client=f"aiormq {metadata.version('aiormq')}",
            durability=(
                "persistent messages; publisher confirm (or tx.commit for transactional workloads) "
                "after the queue has fsynced"
            ),
            fsync_before_ack=True,
        )

    def supports(self, workload: Workload) -> str | None:
        return None

    async def _connect(self) -> AbstractConnection:
        return await aiormq.connect(self._url)

    async def setup(self, workload: Workload) -> None:
        self._workload = workload
        prefix = f"bench-{uuid.uuid4().hex[:10]}"
        conn = await self._connect()
        try:
            version = conn.server_properties.get("version", "?")
            self._version = version.decode() if isinstance(version, bytes) else str(version)
            channel = await conn.channel()
            for q in range(workload.queues):
                name = f"{prefix}-{q}"
                await channel.queue_declare(name, durable=True, arguments={"x-queue-type": self._type})
                self._queues.append(name)
        finally:
            await conn.close()

    async def producer(self, index: int) -> Producer:
        assert self._workload is not None
        conn = await self._connect()
        if self._workload.transactional:
            channel = await conn.channel(publisher_confirms=False)
            await channel.tx_select()
            return _TxProducer(conn, channel, self._queues)
        return _ConfirmProducer(conn, await conn.channel(publisher_confirms=True), self._queues)

    async def consumer(self, index: int, queues: Sequence[int]) -> Consumer:
        assert self._workload is not None
        conn = await self._connect()
        channel = await conn.channel()
        await channel.basic_qos(prefetch_count=max(4 * self._workload.consume_batch, 256))
        return _RabbitConsumer(conn, channel, [self._queues[q] for q in queues])

    def server_pids(self) -> list[int]:
        return find_pids("beam.smp")

    async def teardown(self) -> None:
        if not self._queues:
            return
        conn = await self._connect()
        try:
            channel = await conn.channel()
            for name in self._queues:
                with contextlib.suppress(aiormq.exceptions.AMQPError):
                    await channel.queue_delete(name)
        finally:
            self._queues = []
            await conn.close()
