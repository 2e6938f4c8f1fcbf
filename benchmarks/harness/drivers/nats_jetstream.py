"""NATS JetStream (the shared service at 127.0.0.1:4222), one file-storage stream per run.

Produce: ``publish_async`` for every message of a request, then await all the PubAcks.
Consume: a durable pull consumer with AckPolicy.ALL; ``fetch(n)`` then one ack for the last message.
The stream is deleted at teardown.

Durability, stated plainly: JetStream acknowledges once the message is written to the file store
(the OS page cache); nats-server 2.9 syncs to disk on a timer and the Debian build cannot be set to
fsync every write, so this peer is *not* fsync-before-ack.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from importlib import metadata

import nats
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from benchmarks.harness.cpu import find_pids
from benchmarks.harness.driver import Consumer, DriverInfo, Producer
from benchmarks.harness.workload import Workload

DEFAULT_URL = "nats://127.0.0.1:4222"
_FETCH_WAIT_S = 0.05


class _NatsProducer:
    def __init__(self, nc: Client, js: JetStreamContext, subjects: list[str]) -> None:
        self._nc = nc
        self._js = js
        self._subjects = subjects

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        subject = self._subjects[queue]
        if len(payloads) == 1:
            await self._js.publish(subject, payloads[0])
            return
        futures = [await self._js.publish_async(subject, p) for p in payloads]
        await asyncio.gather(*futures)

    async def close(self) -> None:
        await self._nc.close()


class _NatsConsumer:
    def __init__(self, nc: Client, subs: list[JetStreamContext.PullSubscription]) -> None:
        self._nc = nc
        self._subs = subs
        self._next = 0

    async def receive(self, max_messages: int) -> list[bytes]:
        sub = self._subs[self._next]
        self._next = (self._next + 1) % len(self._subs)
        try:
            msgs = await sub.fetch(max_messages, timeout=_FETCH_WAIT_S)
        except nats.errors.TimeoutError:
            return []
        if msgs:
            await msgs[-1].ack()  # AckPolicy.ALL: acknowledges every earlier message too
        return [m.data for m in msgs]

    async def close(self) -> None:
        await self._nc.close()


class NatsJetStreamDriver:
    def __init__(self, url: str = DEFAULT_URL) -> None:
        self._url = url
        self._stream = ""
        self._subjects: list[str] = []
        self._workload: Workload | None = None
        self._version = "?"

    def describe(self) -> DriverInfo:
        return DriverInfo(
            system="nats-file",
            product=f"NATS JetStream {self._version}, file storage",
            client=f"nats-py {metadata.version('nats-py')}",
            durability=(
                "acked after the write to the file store (page cache); no fsync per write: "
                "nats-server 2.9 (Debian build) syncs on a timer and cannot be set to fsync every write"
            ),
            fsync_before_ack=False,
        )

    def supports(self, workload: Workload) -> str | None:
        if workload.transactional:
            return "JetStream has no transactions"
        return None

    async def _connect(self) -> tuple[Client, JetStreamContext]:
        nc = await nats.connect(self._url)
        return nc, nc.jetstream(publish_async_max_pending=4096)

    async def setup(self, workload: Workload) -> None:
        self._workload = workload
        tag = uuid.uuid4().hex[:10]
        self._stream = f"BENCH_{tag}"
        self._subjects = [f"bench.{tag}.{q}" for q in range(workload.queues)]
        nc, js = await self._connect()
        try:
            v = nc.connected_server_version
            self._version = f"{v.major}.{v.minor}.{v.patch}"
            await js.add_stream(
                StreamConfig(name=self._stream, subjects=[f"bench.{tag}.*"], storage=StorageType.FILE)
            )
        finally:
            await nc.close()

    async def producer(self, index: int) -> Producer:
        nc, js = await self._connect()
        return _NatsProducer(nc, js, self._subjects)

    async def consumer(self, index: int, queues: Sequence[int]) -> Consumer:
        assert self._workload is not None
        nc, js = await self._connect()
        subs = []
        for q in queues:
            config = ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=-1)
            subs.append(
                await js.pull_subscribe(
                    self._subjects[q], durable=f"c{index}q{q}", stream=self._stream, config=config
                )
            )
        return _NatsConsumer(nc, subs)

    def server_pids(self) -> list[int]:
        return find_pids("nats-server")

    async def teardown(self) -> None:
        if not self._stream:
            return
        nc, js = await self._connect()
        try:
            await js.delete_stream(self._stream)
        finally:
            self._stream = ""
            await nc.close()
