"""Process-level chaos: a real ``txmq broker`` (sync flush) SIGKILLed at seeded moments while the txmq
SDK sends over remoting through a fault proxy and the official RocketMQ 5 client sends over gRPC; then a
fresh consumer group reads everything and ``txmq.testing.checker`` judges the history.

The SDK load is two loops: ordered sends (one sender per queue, each waiting for its acknowledgement,
so a queue's sequence numbers must be consumed in order) and transactions (commit, rollback, or left
unknown for the check-back, which answers from the producer's "database"). The official client's
sends run in a thread, one client per round (it is recreated after each kill).
"""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import free_port
from tests.integration.grpc_harness import BrokerProcess, Clients, official_client
from txmq.client import (
    LocalTransactionState,
    Message,
    MessageView,
    Producer,
    PullConsumer,
    TransactionProducer,
)
from txmq.common import errors
from txmq.testing.checker import Figures, check
from txmq.testing.proxy import DEFAULT_RATES, QUIET, FaultProxy, FaultRates, FaultSchedule

SEQ_TOPIC, TX_TOPIC, GRPC_TOPIC = "chaos-seq", "chaos-tx", "chaos-grpc"
QUEUES = 4
TX_GROUP = "chaos-tx-producer"
BROKER_FLAGS = ["--flush", "sync", "--transaction-timeout", "500ms", "--transaction-check-interval", "500ms"]


@dataclass
class ChaosFigures:
    seed: int
    rounds: int = 0
    kills: int = 0
    acknowledged: int = 0
    acknowledged_by_client: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    wrongly_visible: int = 0
    reordered: int = 0
    duplicates: int = 0
    phantom: int = 0
    proxy_connections: int = 0
    proxy_refused: int = 0
    proxy_faults: dict[str, int] = field(default_factory=dict)
    checker: Figures | None = None

    def line(self) -> str:
        return (
            f"chaos seed={self.seed} rounds={self.rounds} kills={self.kills} acked={self.acknowledged} "
            f"{self.acknowledged_by_client} lost={self.lost} wrongly_visible={self.wrongly_visible} "
            f"reordered={self.reordered} duplicates={self.duplicates} phantom={self.phantom} "
            f"proxy_connections={self.proxy_connections} (broker down: {self.proxy_refused}) "
            f"proxy_faults={self.proxy_faults}"
        )


class History:
    """The checker's event list, appended from the event loop and the official client's thread."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, **event: Any) -> None:
        with self._lock:
            self.events.append(event)


class Bank:
    """The transactional producer's local database: the truth check-backs answer from."""

    def __init__(self, history: History, rng: random.Random) -> None:
        self.history = history
        self.rng = rng
        self.outcome: dict[str, str] = {}
        self._lock = threading.Lock()

    def _decide(self, key: str, outcome: str) -> str:
        with self._lock:
            if key not in self.outcome:
                self.outcome[key] = outcome
                self.history.add(f="db", key=key, outcome=outcome)
            final = self.outcome[key]
        if final == "commit":
            self.history.add(f="end_tx", type="invoke", key=key, commit=True)
        return final

    def execute_local_transaction(self, msg: MessageView, arg: Any) -> LocalTransactionState:
        key, r = msg.body.decode(), self.rng.random()
        if r < 0.25:  # leave it to the check-back, which will find this outcome
            self._decide(key, "commit" if r < 0.125 else "rollback")
            return LocalTransactionState.UNKNOW
        outcome = self._decide(key, "commit" if r < 0.75 else "rollback")
        return _STATE[outcome]

    def check_local_transaction(self, msg: MessageView) -> LocalTransactionState:
        # a half whose execute never ran (its acknowledgement died with the broker) is rolled back
        return _STATE[self._decide(msg.body.decode(), "rollback")]


_STATE = {"commit": LocalTransactionState.COMMIT_MESSAGE, "rollback": LocalTransactionState.ROLLBACK_MESSAGE}


class ChaosRun:
    def __init__(self, root: Path, seed: int, rounds: int, rates: FaultRates = DEFAULT_RATES) -> None:
        self.root = root
        self.seed = seed
        self.rounds = rounds
        self.rng = random.Random(seed)
        self.history = History()
        self.bank = Bank(self.history, random.Random(seed + 1))
        self.schedule = FaultSchedule(seed, rates)
        self.proxy_port = free_port()
        self.broker = BrokerProcess(
            root, extra_args=BROKER_FLAGS, config={"remoting_advertised_addr": f"127.0.0.1:{self.proxy_port}"}
        )
        self.proxy = FaultProxy(("127.0.0.1", self.broker.remoting_port), self.schedule)
        self.figures = ChaosFigures(seed)
        self.stop = asyncio.Event()
        self.rmq: Any = None

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.broker.namesrv_port}"

    # ---- the run -------------------------------------------------------------------------------
    async def run(self) -> ChaosFigures:
        await self.proxy.start(self.proxy_port)
        await asyncio.to_thread(self.broker.start)
        try:
            for topic in (SEQ_TOPIC, TX_TOPIC, GRPC_TOPIC):
                await asyncio.to_thread(self.broker.admin, "topic.create", {"name": topic, "queues": QUEUES})
            self.rmq = official_client(self.broker.home)
            await self._load_and_kill()
            self.schedule.rates = QUIET  # the verdict phase reads through a quiet network
            await self._consume_everything()
        finally:
            self.stop.set()
            await self.proxy.close()
            await asyncio.to_thread(self.broker.stop)
        return self._judge()

    async def _load_and_kill(self) -> None:
        producer = Producer(self.namesrv, group="chaos-seq-producer", send_timeout_s=2.0, retries=1)
        tx_producer = TransactionProducer(TX_GROUP, self.bank, self.namesrv, send_timeout_s=2.0, retries=1)
        await producer.start()
        await tx_producer.start()
        self.tx_producer = tx_producer
        loops = [asyncio.create_task(self._ordered_sender(producer, q)) for q in range(QUEUES)]
        loops.append(asyncio.create_task(self._tx_sender(tx_producer)))
        try:
            for _ in range(self.rounds):
                grpc_stop = threading.Event()
                grpc_thread = threading.Thread(target=self._grpc_sender, args=(grpc_stop,), daemon=True)
                grpc_thread.start()
                await asyncio.sleep(0.8 + 1.5 * self.rng.random())
                await self._kill_and_restart()
                grpc_stop.set()
                await asyncio.to_thread(grpc_thread.join, 30)
                self.figures.rounds += 1
            # after the last restart: more sends, and the official client gets acknowledgements even if
            # every round was too short for it to start on a loaded machine
            grpc_stop = threading.Event()
            grpc_thread = threading.Thread(target=self._grpc_sender, args=(grpc_stop, 20), daemon=True)
            grpc_thread.start()
            await asyncio.to_thread(grpc_thread.join, 30)
            grpc_stop.set()
            await asyncio.to_thread(grpc_thread.join, 30)
        finally:
            self.stop.set()
            await asyncio.gather(*loops, return_exceptions=True)
            await producer.close()

    async def _kill_and_restart(self) -> None:
        proc = self.broker.proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait)
        self.broker.proc = None
        self.figures.kills += 1
        self.proxy.reset_all()
        await asyncio.sleep(0.2 * self.rng.random())
        await asyncio.to_thread(self.broker.start)

    async def _ordered_sender(self, producer: Producer, queue_id: int) -> None:
        queues = None
        seq = 0
        while not self.stop.is_set():
            try:
                queues = queues or await producer.transport.route(SEQ_TOPIC, for_write=True)
            except errors.TxmqError:
                await asyncio.sleep(0.1)
                continue
            key = f"s{queue_id}-{seq}"
            sent = {
                "key": key,
                "topic": SEQ_TOPIC,
                "kind": "normal",
                "fifo_group": f"q{queue_id}",
                "seq": seq,
            }
            self.history.add(f="send", type="invoke", msgs=[sent])
            while not self.stop.is_set():  # the same key until acknowledged: order within the queue holds
                try:
                    await producer.send(Message(SEQ_TOPIC, key.encode()), queue=queues[queue_id])
                except errors.TxmqError:
                    self.history.add(f="send", type="info", keys=[key])
                    await asyncio.sleep(0.05)
                    continue
                self.history.add(f="send", type="ok", keys=[key])
                break
            seq += 1

    async def _tx_sender(self, producer: TransactionProducer) -> None:
        n = 0
        while not self.stop.is_set():
            key = f"t{n}"
            n += 1
            self.history.add(f="send", type="invoke", msgs=[{"key": key, "topic": TX_TOPIC, "kind": "tx"}])
            try:
                await producer.send_message_in_transaction(Message(TX_TOPIC, key.encode()))
            except errors.TxmqError:
                self.history.add(f="send", type="info", keys=[key])
                await asyncio.sleep(0.05)
                continue
            self.history.add(f="send", type="ok", keys=[key])

    def _grpc_sender(self, stop: threading.Event, enough: int | None = None) -> None:
        """Send with the official client until ``stop`` (or ``enough`` acknowledgements)."""
        acked = 0
        clients = Clients(self.rmq, self.broker.endpoint)
        try:
            try:
                producer = clients.producer(GRPC_TOPIC)
            except Exception:
                return  # the broker died while the client started; the next round has another
            while not stop.is_set() and (enough is None or acked < enough):
                key = f"g{next(_grpc_keys)}"
                message = self.rmq.Message()
                message.topic = GRPC_TOPIC
                message.body = key.encode()
                self.history.add(f="send", type="invoke", msgs=[{"key": key, "topic": GRPC_TOPIC}])
                try:
                    producer.send(message)
                except Exception:
                    self.history.add(f="send", type="info", keys=[key])
                    time.sleep(0.05)
                    continue
                self.history.add(f="send", type="ok", keys=[key])
                acked += 1
        finally:
            clients.close()

    # ---- the verdict ---------------------------------------------------------------------------
    async def _consume_everything(self) -> None:
        """A fresh group pulls every queue from the beginning; waits (bounded) for check-backs to
        settle the transactions whose decision died with a broker."""
        try:
            group = f"chaos-verdict-{self.seed}"
            async with PullConsumer(group, self.namesrv) as consumer:
                queues = [
                    mq for topic in (SEQ_TOPIC, TX_TOPIC, GRPC_TOPIC) for mq in await consumer.queues(topic)
                ]
                consumer.assign(queues)
                await consumer.seek_to_beginning()
                deadline = time.monotonic() + 120
                seen: set[str] = set()
                while time.monotonic() < deadline:
                    batch = await consumer.poll(timeout_s=0.3)
                    for m in batch:
                        key = m.body.decode()
                        seen.add(key)
                        got = {"key": key, "topic": m.topic, "queue": m.queue_id, "offset": m.queue_offset}
                        self.history.add(f="consume", t=0, group=group, via="pull", msgs=[got])
                    if not batch and self._settled(seen):
                        break
                self.history.add(f="end", drained={group: [SEQ_TOPIC, TX_TOPIC, GRPC_TOPIC]})
        finally:
            await self.tx_producer.close()

    def _settled(self, seen: set[str]) -> bool:
        """Every acknowledged message that must be visible (a transaction: once committed) was consumed;
        until then keep polling (check-backs settle transactions whose decision died with a broker)."""
        return all(
            k in seen for k in self._acked() if not k.startswith("t") or self.bank.outcome.get(k) == "commit"
        )

    def _acked(self) -> set[str]:
        events = list(self.history.events)
        return {k for e in events if e.get("f") == "send" and e.get("type") == "ok" for k in e["keys"]}

    def _judge(self) -> ChaosFigures:
        figures = check(self.history.events)
        out = self.figures
        out.checker = figures
        out.acknowledged = figures.acknowledged
        acked = {
            k
            for e in self.history.events
            if e.get("f") == "send" and e.get("type") == "ok"
            for k in e["keys"]
        }
        for prefix, name in (("s", "sdk-remoting"), ("t", "sdk-tx"), ("g", "official-grpc")):
            out.acknowledged_by_client[name] = sum(1 for k in acked if k.startswith(prefix))
        out.lost, out.wrongly_visible, out.reordered = (
            figures.lost,
            figures.wrongly_visible,
            figures.reordered,
        )
        out.duplicates = sum(figures.duplicates.values())
        out.phantom = figures.phantom
        out.proxy_connections = self.proxy.figures.connections
        out.proxy_refused = self.proxy.figures.upstream_failures
        out.proxy_faults = dict(self.proxy.figures.faults)
        return out


_grpc_keys = iter(range(10**9))
