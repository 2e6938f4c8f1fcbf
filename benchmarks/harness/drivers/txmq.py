"""txmq itself: a private ``txmq broker`` subprocess per run, driven through txmq's own Python SDK.

Three systems share this driver:

- ``txmq-sync``: ``--flush sync`` (a send is acknowledged after the group-commit fdatasync covering it),
  SDK on the native remoting protocol through the broker's embedded name server;
- ``txmq-async``: the same with ``--flush async`` (acked once in the page cache, flushed every 500 ms);
- ``txmq-grpc``: ``--flush sync``, SDK with ``transport="grpc"`` (RocketMQ 5's v2 protocol, the door the
  official clients use). txmq's SDK rather than the official ``rocketmq`` client: that one is
  thread-based, has no asyncio API to drive from the runner, and no offset pull consumer.

Produce: ``Producer.send`` for one message, ``Producer.send_batch`` (one atomic SEND_BATCH_MESSAGE) for
a request of several; the runner's in-flight slots call them concurrently on one producer. Remoting
sends pin the queue the runner names; the gRPC server places messages itself.
Transactions: one ``TransactionProducer`` per producer, ``send_message_in_transaction`` with a listener
that commits at once (no local work, so only the broker's cost is measured): a durable half message,
then END_TRANSACTION, oneway as RocketMQ's clients send it (remoting) or a unary call (gRPC).
Consume: a ``PullConsumer`` (offset pull, long polling) reading from the first offset; after each
non-empty batch the new positions are committed (UPDATE_CONSUMER_OFFSET), which is the acknowledgement.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
from asyncio.subprocess import PIPE
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Literal, cast

from benchmarks.harness.driver import Consumer, DriverInfo, Producer
from benchmarks.harness.runner import SlotOutcome
from benchmarks.harness.workload import Workload
from txmq.cli.admin_client import call as admin_call
from txmq.client import (
    ConsumeFrom,
    LocalTransactionState,
    Message,
    MessageQueue,
    MessageView,
    PullConsumer,
    TransactionListener,
    TransactionProducer,
)
from txmq.client import Producer as SdkProducer
from txmq.client._factory import make_transport
from txmq.common import limits
from txmq.common.ports import free_port

Flush = Literal["sync", "async"]
Transport = Literal["remoting", "grpc"]

TOPIC = "bench"
_READY = "txmq broker ready on"
_START_TIMEOUT_S = 60.0
_START_ATTEMPTS = 5
_STOP_TIMEOUT_S = 15.0
_LONG_POLL_MS = 50
_CHECKOUT = Path(__file__).resolve().parents[3]  # holds benchmarks/ (for the producer workers)
LENGTH = struct.Struct(">I")
READY = b"R"
OK = b"\x00"
SEND = b"S"  # parent -> worker: one request (u32 length + payload)
RUN = b"G"  # parent -> worker: run a whole slot (u32 length + JSON), answered OK + u32 length + JSON


def _src_dir() -> Path:
    """The sources the broker subprocess runs: the same txmq this process imported (this checkout's)."""
    import txmq

    return Path(txmq.__file__).resolve().parents[1]


def _txmq_version() -> str:
    try:
        return metadata.version("txmq")
    except metadata.PackageNotFoundError:
        return "dev"


class _CommitAtOnce:
    """A transaction listener with no local work: commit immediately, and say so on check-back."""

    async def execute_local_transaction(self, message: MessageView, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    async def check_local_transaction(self, message: MessageView) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def listener() -> TransactionListener:
    """The SDK awaits coroutine listener methods directly (no thread-pool hop, so the local
    transaction costs ~nothing); the TransactionListener protocol only spells out the blocking form."""
    return cast(TransactionListener, _CommitAtOnce())


class _TxmqProducer:
    def __init__(self, producer: SdkProducer, queues: list[MessageQueue] | None) -> None:
        self._producer = producer
        self._tx = producer if isinstance(producer, TransactionProducer) else None
        self._queues = queues  # None: the server places messages (gRPC)

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        mq = None if self._queues is None else self._queues[queue % len(self._queues)]
        if self._tx is not None:
            for payload in payloads:  # supports() admits only batch == 1 here
                await self._tx.send_message_in_transaction(Message(TOPIC, payload))
            return
        if len(payloads) == 1:
            await self._producer.send(Message(TOPIC, payloads[0]), queue=mq)
            return
        await self._producer.send_batch([Message(TOPIC, payload) for payload in payloads], queue=mq)

    async def close(self) -> None:
        await self._producer.close()


class _ProcessProducer:
    """A producer running in a ``txmq_worker`` subprocess; one request at a time (tx-8 keeps one)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._lock = asyncio.Lock()

    @classmethod
    async def start(cls, endpoint: str, transport: str, group: str, transactional: bool) -> _ProcessProducer:
        env = dict(os.environ)
        root = _CHECKOUT
        env["PYTHONPATH"] = os.pathsep.join([str(_src_dir()), str(root), env.get("PYTHONPATH", "")])
        args = [sys.executable, "-m", "benchmarks.harness.drivers.txmq_worker", endpoint, transport, group]
        proc = await asyncio.create_subprocess_exec(
            *args, "1" if transactional else "0", stdin=PIPE, stdout=PIPE, env=env, cwd=root
        )
        producer = cls(proc)
        assert proc.stdout is not None
        try:
            ready = await asyncio.wait_for(proc.stdout.readexactly(1), _START_TIMEOUT_S)
        except (asyncio.IncompleteReadError, TimeoutError):
            ready = b""
        if ready != READY:
            await producer.close()
            raise RuntimeError(f"the producer worker for {group} did not start")
        return producer

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        async with self._lock:
            for payload in payloads:
                await self._call(SEND, payload)

    async def run_slot(
        self, first_queue: int, workload: Workload, measure_from: int, deadline: int, interval_ns: int
    ) -> SlotOutcome:
        """The worker runs the slot's loop itself: no pipe round trip per request in the measurement."""
        order = {
            "workload": workload.to_dict(), "first_queue": first_queue, "measure_from": measure_from,
            "deadline": deadline, "interval_ns": interval_ns,
        }  # fmt: skip
        async with self._lock:
            answer = json.loads(await self._call(RUN, json.dumps(order).encode()))
        return SlotOutcome(answer["acked_total"], answer["acked_in_window"], answer["publish_ns"])

    async def _call(self, kind: bytes, body: bytes) -> bytes:
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(kind + LENGTH.pack(len(body)) + body)
        answer = await stdout.readexactly(1)
        (size,) = LENGTH.unpack(await stdout.readexactly(LENGTH.size))
        text = await stdout.readexactly(size)
        if answer != OK:
            raise RuntimeError(text.decode(errors="replace"))
        return text

    async def close(self) -> None:
        if self._proc.returncode is not None:
            return
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            await asyncio.wait_for(self._proc.wait(), _STOP_TIMEOUT_S)
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()


class _TxmqConsumer:
    def __init__(self, consumer: PullConsumer, queues: list[MessageQueue]) -> None:
        self._consumer = consumer
        self._queues = queues
        self._next = 0

    async def receive(self, max_messages: int) -> list[bytes]:
        """Try every queue once without waiting; if all are empty, long-poll the next one briefly."""
        consumer = self._consumer
        n = len(self._queues)
        for attempt in range(n + 1):
            mq = self._queues[self._next % n]
            self._next += 1
            wait = _LONG_POLL_MS if attempt == n or n == 1 else 0
            views = await consumer.pull(mq, max_messages=max_messages, long_poll_ms=wait)
            if views:
                await consumer.commit({mq: await consumer.position(mq)})
                return [view.body for view in views]
            if n == 1:
                break
        return []

    async def close(self) -> None:
        await self._consumer.close()


class TxmqDriver:
    """One private broker per run (fresh data directory and HOME), stopped and deleted at teardown."""

    def __init__(self, flush: Flush = "sync", transport: Transport = "remoting") -> None:
        if flush not in ("sync", "async") or transport not in ("remoting", "grpc"):
            raise ValueError("flush must be sync|async and transport remoting|grpc")
        self._flush: Flush = flush
        self._transport: Transport = transport
        self._proc: asyncio.subprocess.Process | None = None
        self._dir: Path | None = None
        self._ports = (0, 0, 0)  # gRPC, remoting, name server
        self._workload: Workload | None = None
        self._queues: list[MessageQueue] = []
        self._workers: list[_ProcessProducer] = []

    @property
    def system(self) -> str:
        return "txmq-grpc" if self._transport == "grpc" else f"txmq-{self._flush}"

    def describe(self) -> DriverInfo:
        sync = self._flush == "sync"
        grpc = self._transport == "grpc"
        door = "gRPC v2 (transport=grpc)" if grpc else "native remoting protocol"
        end = "is a unary call" if grpc else "is oneway, as RocketMQ clients send it"
        return DriverInfo(
            system=self.system,
            product=f"txmq {_txmq_version()} broker, --flush {self._flush}, private subprocess",
            client=f"txmq Python SDK (asyncio), {door}",
            durability=(
                "acked after the group-commit fdatasync covering the message (for a transaction: the "
                f"half message; END_TRANSACTION {end})"
                if sync
                else "acked once written to the page cache; CommitLog fdatasync every 500 ms"
            ),
            fsync_before_ack=sync,
        )

    def supports(self, workload: Workload) -> str | None:
        if workload.transactional and workload.batch > 1:
            return "transactional batches are rejected by design (RocketMQ semantics)"
        return None

    # ---- the private broker -------------------------------------------------------------------------
    async def setup(self, workload: Workload) -> None:
        self._workload = workload
        self._dir = Path(tempfile.mkdtemp(prefix="bench-txmq-"))
        home = self._dir / "home"
        home.mkdir()
        env = dict(os.environ)
        env["PYTHONPATH"] = str(_src_dir()) + os.pathsep + env.get("PYTHONPATH", "")
        env["HOME"] = str(home)
        env["PYTHONUNBUFFERED"] = "1"
        log = self._dir / "broker.log"
        for attempt in range(_START_ATTEMPTS):
            # free_port() checks a port is free; another process can bind it before the broker does:
            # the broker then exits with "address already in use" and starts again on fresh ports
            self._ports = (free_port(), free_port(), free_port())
            grpc_port, remoting_port, namesrv_port = self._ports
            args = [
                sys.executable, "-m", "txmq", "broker", "--data-dir", str(self._dir / "data"),
                "--port", str(grpc_port), "--remoting-port", str(remoting_port),
                "--namesrv-port", str(namesrv_port), "--flush", self._flush,
                "--default-queues", str(max(workload.queues, 1)),
            ]  # fmt: skip
            with log.open("wb") as out:
                self._proc = await asyncio.create_subprocess_exec(
                    *args, stdout=out, stderr=asyncio.subprocess.STDOUT, env=env
                )
            try:
                await self._wait_ready(log)
                break
            except RuntimeError as exc:
                if attempt + 1 == _START_ATTEMPTS or "address already in use" not in str(exc).lower():
                    raise
                await self._proc.wait()
        await asyncio.to_thread(self._create_topic, workload.queues)
        self._queues = await self._route(workload.queues)
        if workload.producers > 1:  # started together here, outside the measurement, not one by one
            started = await asyncio.gather(
                *(
                    _ProcessProducer.start(
                        self._endpoint(), self._transport, f"bench-p{i}", workload.transactional
                    )
                    for i in range(workload.producers)
                ),
                return_exceptions=True,
            )
            self._workers = [w for w in started if isinstance(w, _ProcessProducer)]
            for outcome in started:
                if isinstance(outcome, BaseException):
                    raise outcome  # teardown stops the workers that did start

    async def _wait_ready(self, log: Path) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if _READY in await asyncio.to_thread(log.read_text, errors="replace"):
                return
            if self._proc.returncode is not None:
                break
            await asyncio.sleep(0.05)
        tail = (await asyncio.to_thread(log.read_text, errors="replace"))[-2000:]
        raise RuntimeError(f"the private txmq broker did not start: {tail}")

    def _create_topic(self, queues: int) -> None:
        admin_call(f"127.0.0.1:{self._ports[0]}", "topic.create", {"name": TOPIC, "queues": queues})

    async def _route(self, queues: int) -> list[MessageQueue]:
        """The topic's queues as the remoting client sees them, once the name server has them all."""
        if self._transport == "grpc":
            return []
        transport = make_transport(self._endpoint(), "remoting", request_timeout_s=3.0)
        await transport.start()
        try:
            deadline = time.monotonic() + _START_TIMEOUT_S  # a condition: it returns as soon as it holds
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception):
                    found = await transport.route(TOPIC, for_write=True)
                    if len(found) >= queues:
                        return sorted(found, key=lambda q: q.queue_id)
                transport.invalidate_route(TOPIC)
                await asyncio.sleep(0.05)
            raise RuntimeError(f"topic {TOPIC} never showed {queues} queues on the name server")
        finally:
            await transport.close()

    def _endpoint(self) -> str:
        grpc_port, _remoting, namesrv_port = self._ports
        return f"127.0.0.1:{grpc_port if self._transport == 'grpc' else namesrv_port}"

    # ---- clients --------------------------------------------------------------------------------------
    async def producer(self, index: int) -> Producer:
        assert self._workload is not None
        if self._workers:
            return self._workers[index]
        window = max(self._workload.in_flight * 2, 64)
        client: SdkProducer
        if self._workload.transactional:
            client = TransactionProducer(
                f"bench-tx-{index}", listener(), self._endpoint(), transport=self._transport,
                max_in_flight=window,
            )  # fmt: skip
        else:
            client = SdkProducer(
                self._endpoint(), group=f"bench-p{index}", transport=self._transport, max_in_flight=window
            )
        await client.start()
        return _TxmqProducer(client, None if self._transport == "grpc" else self._queues)

    async def consumer(self, index: int, queues: Sequence[int]) -> Consumer:
        assert self._workload is not None
        client = PullConsumer(
            "bench-consumers", self._endpoint(), transport=self._transport,
            pull_batch_size=min(self._workload.consume_batch, limits.pull_batch_max),
            consume_from=ConsumeFrom.FIRST_OFFSET,
        )  # fmt: skip
        await client.start()
        known = await client.queues(TOPIC) if self._transport == "grpc" else self._queues
        mine = [q for q in known if q.queue_id in set(queues)]
        client.assign(mine)
        return _TxmqConsumer(client, mine)

    def client_pids(self) -> list[int]:
        """Producer worker processes (their CPU is the client's too)."""
        return [worker.pid for worker in self._workers]

    def server_pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None and self._proc.returncode is None else []

    async def teardown(self) -> None:
        for worker in self._workers:  # normally closed by the runner already; close() is idempotent
            await worker.close()
        if self._proc is not None:
            if self._proc.returncode is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(self._proc.wait(), _STOP_TIMEOUT_S)
                except TimeoutError:
                    self._proc.kill()
                    await self._proc.wait()
            self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._queues = []
        self._workers = []
