"""The simulated clients: producers (every send kind, transactions with a local "database"),
POP consumers (ack, nack, forget) and an offset-pull consumer. Each action records what the client saw
in the simulation's history; the broker is reached through the faulty network."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from txmq.common.errors import TxmqError
from txmq.common.message import Message, MessageView
from txmq.common.properties import RETRY_TOPIC
from txmq.storage.api import ReadStatus
from txmq.testing.network import RpcTimeout

if TYPE_CHECKING:
    from txmq.testing.sim import Simulation


class Workload:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.rng = sim.rng
        self.next_key = 0
        self.fifo_seq: dict[str, int] = {}
        self.db: dict[str, str] = {}  # the producers' local transactions: key -> commit/rollback/pending
        self.txids: dict[str, str] = {}
        self.pull_pos: dict[tuple[str, int], int] = {}

    # ---- producing -----------------------------------------------------------------------------
    def new_key(self) -> tuple[str, str]:
        self.next_key += 1
        message_id = f"01{self.sim.seed & 0xFFFFFFFF:08X}{self.next_key:024X}"
        return f"k{self.next_key}", message_id

    async def send(
        self, messages: list[Message], meta: list[dict[str, Any]], *, retries: int, allow_delay: bool = True
    ) -> list[Any] | None:
        """Send with retries on timeouts (a retry may duplicate the message: at-least-once)."""
        from txmq.testing.sim import CTX

        keys = [m["key"] for m in meta]
        self.sim.record({"f": "send", "type": "invoke", "msgs": meta})
        for _ in range(retries + 1):
            try:
                results = await self.sim.rpc("send", lambda b: b.send(messages, CTX), allow_delay=allow_delay)
            except RpcTimeout:
                self.sim.record({"f": "send", "type": "info", "keys": keys})
                continue
            except TxmqError as exc:
                self.sim.record({"f": "send", "type": "fail", "keys": keys, "error": type(exc).__name__})
                return None
            offsets = [[r.queue.topic, r.queue.queue_id, r.queue_offset] for r in results]
            self.sim.record({"f": "send", "type": "ok", "keys": keys, "at": offsets})
            return list(results)
        return None

    async def send_plain(self) -> None:
        count = 1 if self.rng.random() < 0.7 else self.rng.randint(2, 5)
        pairs = [self.new_key() for _ in range(count)]
        messages = [Message(topic="t-normal", body=k.encode(), message_id=mid) for k, mid in pairs]
        meta: list[dict[str, Any]] = [{"key": k, "topic": "t-normal", "kind": "normal"} for k, _ in pairs]
        await self.send(messages, meta, retries=self.rng.randint(0, 2))

    async def send_fifo(self) -> None:
        group = f"order-{self.rng.randint(1, 3)}"
        seq = self.fifo_seq.get(group, 0) + 1
        self.fifo_seq[group] = seq
        key, mid = self.new_key()
        message = Message(topic="t-fifo", body=key.encode(), message_id=mid, message_group=group)
        meta: list[dict[str, Any]] = [
            {"key": key, "topic": "t-fifo", "kind": "fifo", "fifo_group": group, "seq": seq}
        ]
        await self.send([message], meta, retries=3, allow_delay=False)  # FIFO producers send in order

    async def send_delayed(self) -> None:
        from txmq.testing.sim import DELAY_LEVELS_MS

        key, mid = self.new_key()
        now = self.sim.clock.now_ms()
        if self.rng.random() < 0.5:
            level = self.rng.randint(1, len(DELAY_LEVELS_MS))
            message = Message(topic="t-delay", body=key.encode(), message_id=mid, delay_level=level)
            deliver_ms = now + DELAY_LEVELS_MS[level - 1]
        else:
            deliver_ms = now + self.rng.randint(-500, 8_000)
            message = Message(
                topic="t-delay", body=key.encode(), message_id=mid, delivery_timestamp_ms=deliver_ms
            )
        meta: list[dict[str, Any]] = [
            {"key": key, "topic": "t-delay", "kind": "delay", "deliver_ms": deliver_ms}
        ]
        await self.send([message], meta, retries=self.rng.randint(0, 1))

    # ---- transactions --------------------------------------------------------------------------
    def set_db(self, key: str, outcome: str) -> None:
        self.db[key] = outcome
        self.sim.record({"f": "db", "type": "ok", "key": key, "outcome": outcome})

    async def transaction(self) -> None:
        """Half message, local transaction, then EndTransaction, unless the producer crashes first."""
        key, mid = self.new_key()
        self.set_db(key, "pending")
        message = Message(topic="t-tx", body=key.encode(), message_id=mid, transactional=True)
        results = await self.send([message], [{"key": key, "topic": "t-tx", "kind": "tx"}], retries=1)
        if results is None:
            self.set_db(key, "rollback")  # no half acknowledged: the local transaction never runs
            return
        self.txids[key] = results[0].transaction_id
        roll = self.rng.random()
        self.set_db(key, "commit" if roll < 0.5 else "rollback" if roll < 0.8 else "pending")
        if self.rng.random() < self.sim.config.producer_crash:
            channel = self.sim.channels[self.rng.choice(("p1", "p2"))]
            channel.open = False
            self.sim.fault(f"producer_crash {channel.name} after its local transaction {key}")
            return
        await self.end_transaction(key, from_check=False)

    async def end_transaction(self, key: str, *, from_check: bool, txid: str | None = None) -> bool:
        outcome = self.db.get(key, "rollback")
        commit = {"commit": True, "rollback": False}.get(outcome)
        txid = txid or self.txids[key]
        self.sim.record(
            {"f": "end_tx", "type": "invoke", "key": key, "commit": commit, "from_check": from_check}
        )
        for _ in range(2):
            try:
                await self.sim.rpc(
                    "end_tx",
                    lambda b: b.end_transaction(
                        topic="t-tx", message_id="", transaction_id=txid, commit=commit, from_check=from_check
                    ),
                )
            except RpcTimeout:
                self.sim.record({"f": "end_tx", "type": "info", "key": key})
                continue
            except TxmqError as exc:
                self.sim.record({"f": "end_tx", "type": "fail", "key": key, "error": type(exc).__name__})
                return True
            self.sim.record({"f": "end_tx", "type": "ok", "key": key})
            return True
        return False

    async def resolve_pending(self) -> None:
        """A local transaction that was in doubt finishes; the producer may or may not tell the broker."""
        pending = [k for k, v in self.db.items() if v == "pending" and k in self.txids]
        if not pending:
            return
        key = self.rng.choice(pending)
        self.set_db(key, "commit" if self.rng.random() < 0.6 else "rollback")
        if self.rng.random() < 0.5:
            await self.end_transaction(key, from_check=False)

    async def answer_checks(self, *, reliable: bool = False) -> bool:
        """Producers answer the broker's check-backs from their local database."""
        checks, self.sim.pending_checks = self.sim.pending_checks, []
        for key, txid, _ in checks:
            if reliable:
                saved, self.sim.net.faults = self.sim.net.faults, type(self.sim.net.faults)()
                await self.end_transaction(key, from_check=True, txid=txid)
                self.sim.net.faults = saved
            else:
                await self.end_transaction(key, from_check=True, txid=txid)
        return bool(checks)

    async def settle_transactions(self) -> None:
        """Before draining: every in-doubt local transaction ends, every producer comes back."""
        for key in sorted(k for k, v in self.db.items() if v == "pending"):
            self.set_db(key, "commit" if self.rng.random() < 0.6 else "rollback")
        for channel in self.sim.channels.values():
            channel.open = True

    # ---- consuming -----------------------------------------------------------------------------
    def record_consumed(self, group: str, via: str, views: list[MessageView]) -> None:
        msgs: list[dict[str, Any]] = []
        for v in views:
            if v.reconsume_times > 0 or RETRY_TOPIC in v.properties:
                # redelivered from the group's retry queue: the view names the original topic but the
                # retry queue's position, so its offset says nothing about the original queue
                msgs.append({"key": v.body.decode(), "topic": v.topic, "retry": True})
            else:
                msgs.append(
                    {"key": v.body.decode(), "topic": v.topic, "queue": v.queue_id, "offset": v.queue_offset}
                )
        self.sim.record({"f": "consume", "type": "ok", "group": group, "via": via, "msgs": msgs})

    async def receive(self, group: str, topic: str, batch: int) -> list[MessageView]:
        invisible_ms = self.rng.randint(1_000, 5_000)
        try:
            views: list[MessageView] = await self.sim.rpc(
                "receive",
                lambda b: b.receive(
                    group=group,
                    topic=topic,
                    expression="*",
                    batch_size=batch,
                    invisible_ms=invisible_ms,
                    long_poll_ms=0,
                ),
                allow_delay=False,
            )
        except (RpcTimeout, TxmqError):
            return []
        if views:
            self.record_consumed(group, "pop", views)
        return views

    async def settle(self, group: str, view: MessageView, choice: str) -> None:
        handle = view.receipt_handle
        assert handle is not None
        try:
            if choice == "ack":
                await self.sim.rpc("ack", _ack(group, handle), allow_delay=False)
            elif choice == "nack":
                await self.sim.rpc(
                    "nack", _nack(group, handle, self.rng.randint(0, 2_000)), allow_delay=False
                )
        except (RpcTimeout, TxmqError) as exc:
            self.sim.record({"f": choice, "type": "fail", "group": group, "error": type(exc).__name__})

    async def consume(self) -> None:
        group = self.rng.choice(sorted(POP))
        topic = self.rng.choice(POP[group])
        for view in await self.receive(group, topic, self.rng.randint(1, 8)):
            roll = self.rng.random()
            choice = (
                "ack"
                if roll < 0.75 or (group == "gf" and roll < 0.9)
                else "nack"
                if roll < 0.85
                else "forget"
            )
            await self.settle(group, view, choice)

    async def consume_all(self, group: str, topic: str) -> bool:
        moved = False
        for _ in range(64):
            views = await self.receive(group, topic, 16)
            if not views:
                return moved
            moved = True
            for view in views:
                await self.settle(group, view, "ack")
        return moved

    async def pull(self, topic: str, queue: int, *, until_end: bool = False) -> bool:
        from txmq.testing.sim import PULL_GROUP

        assert self.sim.broker is not None
        moved = False
        for _ in range(64 if until_end else 1):
            position = self.pull_pos.get((topic, queue), 0)
            try:
                result = await self.sim.broker.pull(
                    group=PULL_GROUP, topic=topic, queue_id=queue, offset=position, batch_size=8
                )
            except TxmqError:
                return moved
            if result.status in (ReadStatus.OFFSET_OVERFLOW, ReadStatus.OFFSET_TOO_SMALL):
                self.sim.record(
                    {
                        "f": "pull_status",
                        "type": "info",
                        "group": PULL_GROUP,
                        "topic": topic,
                        "queue": queue,
                        "status": result.status.name,
                        "offset": position,
                    }
                )
            if result.messages:
                self.record_consumed(PULL_GROUP, "pull", result.messages)
                moved = True
            self.pull_pos[(topic, queue)] = result.next_offset
            if result.status is not ReadStatus.FOUND:
                break
        return moved

    async def deliver_delayed(self) -> None:
        for name, call in self.sim.net.take_delayed(1):
            assert self.sim.broker is not None
            try:
                await call(self.sim.broker)
            except TxmqError as exc:
                self.sim.record({"f": "late_rpc", "type": "info", "rpc": name, "error": type(exc).__name__})

    # ---- one step ------------------------------------------------------------------------------
    async def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.25:
            await self.send_plain()
        elif roll < 0.35:
            await self.send_fifo()
        elif roll < 0.45:
            await self.send_delayed()
        elif roll < 0.58:
            await self.transaction()
        elif roll < 0.78:
            await self.consume()
        elif roll < 0.84:
            topic = self.rng.choice(("t-normal", "t-fifo"))
            await self.pull(topic, self.rng.randrange(2))
        elif roll < 0.88:
            await self.resolve_pending()
        elif roll < 0.91:
            await self.deliver_delayed()
        elif roll < 0.93:
            for channel in self.sim.channels.values():
                channel.open = True
        else:
            self.sim.clock.advance(self.rng.randint(100, 2_500))
            await self.sim.tick()
            await self.answer_checks()


POP = {"ga": ("t-normal", "t-delay", "t-tx"), "gb": ("t-normal", "t-tx"), "gf": ("t-fifo",)}


def _ack(group: str, handle: str) -> Any:
    async def call(broker: Any) -> None:
        broker.ack(group=group, receipt_handle=handle)

    return call


def _nack(group: str, handle: str, invisible_ms: int) -> Any:
    async def call(broker: Any) -> None:
        broker.change_invisible(group=group, receipt_handle=handle, invisible_ms=invisible_ms)

    return call
