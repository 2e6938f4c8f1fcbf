"""Redis Streams on a private redis-server with AOF: ``appendfsync always`` (fsync before the reply)
or ``everysec`` (fsync once a second, in the background).

Produce: XADD (one request = a pipeline of XADDs; MULTI/EXEC for transactional workloads).
Consume: XREADGROUP COUNT n + one XACK for the ids returned.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.utils import HIREDIS_AVAILABLE

from benchmarks.harness.driver import Consumer, DriverInfo, Producer
from benchmarks.harness.workload import Workload

_GROUP = "bench"
_FIELD = b"d"
_BLOCK_MS = 50


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
    for token in out.split():
        if token.startswith("v="):
            return token[2:]
    return "?"


class _RedisProducer:
    def __init__(self, client: aioredis.Redis, streams: list[str], transactional: bool) -> None:
        self._client = client
        self._streams = streams
        self._transactional = transactional

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        stream = self._streams[queue]
        if len(payloads) == 1 and not self._transactional:
            await self._client.xadd(stream, {_FIELD: payloads[0]})
            return
        pipe = self._client.pipeline(transaction=self._transactional)
        for payload in payloads:
            pipe.xadd(stream, {_FIELD: payload})
        await pipe.execute()

    async def close(self) -> None:
        await self._client.aclose()


class _RedisConsumer:
    def __init__(self, client: aioredis.Redis, streams: list[str], name: str) -> None:
        self._client = client
        self._streams = streams
        self._name = name

    async def receive(self, max_messages: int) -> list[bytes]:
        per_stream = max(1, max_messages // len(self._streams))
        reply: Any = await self._client.xreadgroup(
            _GROUP, self._name, dict.fromkeys(self._streams, ">"), count=per_stream, block=_BLOCK_MS
        )
        payloads: list[bytes] = []
        for stream, entries in reply or []:
            ids = [entry_id for entry_id, _ in entries]
            payloads.extend(fields[_FIELD] for _, fields in entries)
            if ids:
                await self._client.xack(stream, _GROUP, *ids)
        return payloads

    async def close(self) -> None:
        await self._client.aclose()


class RedisStreamsDriver:
    """One private redis-server per run (fresh AOF in a temp dir), stopped and deleted at teardown."""

    def __init__(self, appendfsync: str = "always") -> None:
        if appendfsync not in ("always", "everysec"):
            raise ValueError("appendfsync must be 'always' or 'everysec'")
        self._fsync = appendfsync
        self._proc: asyncio.subprocess.Process | None = None
        self._dir: Path | None = None
        self._port = 0
        self._streams: list[str] = []
        self._workload: Workload | None = None

    def describe(self) -> DriverInfo:
        always = self._fsync == "always"
        return DriverInfo(
            system=f"redis-{self._fsync}",
            product=f"Redis {_server_version()} Streams, AOF appendfsync {self._fsync}",
            client=f"redis-py {redis.__version__} (asyncio{', hiredis' if HIREDIS_AVAILABLE else ''})",
            durability=(
                "AOF fsync before the reply to every write (batch = one pipeline)"
                if always
                else "acked from memory; AOF fsync once a second in the background"
            ),
            fsync_before_ack=always,
        )

    def supports(self, workload: Workload) -> str | None:
        return None

    async def setup(self, workload: Workload) -> None:
        self._workload = workload
        self._dir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        self._port = _free_port()
        args = ["redis-server", "--port", str(self._port), "--bind", "127.0.0.1", "--dir", str(self._dir)]
        args += ["--appendonly", "yes", "--appendfsync", self._fsync, "--save", "", "--daemonize", "no"]
        self._proc = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        self._streams = [f"bench-{q}" for q in range(workload.queues)]
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        client = self._client()
        try:
            for _ in range(200):
                try:
                    await client.ping()
                    return
                except redis.ConnectionError:
                    await asyncio.sleep(0.02)
            raise RuntimeError("private redis-server did not start")
        finally:
            await client.aclose()

    def _client(self, pool_size: int = 1) -> aioredis.Redis:
        return aioredis.Redis(host="127.0.0.1", port=self._port, max_connections=max(pool_size, 1))

    async def producer(self, index: int) -> Producer:
        assert self._workload is not None
        client = self._client(self._workload.in_flight + 4)
        return _RedisProducer(client, self._streams, self._workload.transactional)

    async def consumer(self, index: int, queues: Sequence[int]) -> Consumer:
        client = self._client()
        streams = [self._streams[q] for q in queues]
        for stream in streams:
            try:
                await client.xgroup_create(stream, _GROUP, id="$", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        return _RedisConsumer(client, streams, f"c{index}")

    def server_pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None else []

    async def teardown(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), 10)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
            self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
