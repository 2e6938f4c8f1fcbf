"""Deterministic simulation: one seed drives a random workload and random faults against a real
Broker on an in-memory faulty disk with a stepped clock, in one process (in the spirit of
TigerBeetle's VOPR and FoundationDB's simulator).

Everything non-deterministic is injected: the clock (FakeClock), the disk (CrashingFileSystem with
inline flushing, see ``Broker.open(inline_flush=True)``), the network (FaultyNetwork) and the
producers' check-back channels. Each step picks one action from the seeded RNG; the history (see
:mod:`txmq.testing.checker`) records what the clients saw. The same seed gives the same history, so
``history_hash`` identifies a run and a failing seed replays exactly::

    result = run_seed(42)
    assert result.figures.ok, result.report()
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.broker.config import BrokerConfig
from txmq.broker.send import SendContext
from txmq.common.clock import FakeClock
from txmq.common.errors import CorruptRecord, TxmqError
from txmq.common.message import MessageView
from txmq.storage.api import FlushMode
from txmq.storage.verify import repair_store
from txmq.testing.checker import Figures, check
from txmq.testing.faults import CrashingFileSystem, SimulatedCrash
from txmq.testing.network import FaultyNetwork, NetworkFaults
from txmq.testing.workload import Workload

DELAY_LEVELS_MS = (1_000, 2_000, 3_000, 5_000)
TOPICS = ("t-normal", "t-delay", "t-tx", "t-fifo")
POP_GROUPS = {"ga": ("t-normal", "t-delay", "t-tx"), "gb": ("t-normal", "t-tx"), "gf": ("t-fifo",)}
PULL_GROUP, PULL_TOPICS = "gp", ("t-normal", "t-fifo")
QUEUES = 2


@dataclass
class SimConfig:
    """Sizes and fault rates of one run (per step probabilities)."""

    steps: int = 80
    restart: float = 0.02
    crash_now: float = 0.02
    crash_armed: float = 0.03
    disk_full: float = 0.015
    fsync_error: float = 0.01
    write_error: float = 0.01
    producer_crash: float = 0.15
    network: NetworkFaults = field(
        default_factory=lambda: NetworkFaults(drop_request=0.03, drop_reply=0.05, duplicate=0.03, delay=0.03)
    )
    drain_rounds_max: int = 80


@dataclass
class SimResult:
    seed: int
    history: list[dict[str, Any]]
    figures: Figures
    faults: list[str]
    history_hash: str
    simulated_ms: int
    counters: dict[str, int] = field(default_factory=dict)  # network and check-back faults

    def report(self) -> str:
        """What a failing seed prints: how to replay it, its fault schedule and its figures."""
        lines = [
            f"seed={self.seed} (replay: TXMQ_SIM_SEED={self.seed} pytest tests/sim -k replay)",
            f"history_hash={self.history_hash}",
            "fault schedule:",
        ]
        lines += [f"  {f}" for f in self.faults] or ["  (none)"]
        lines.append(json.dumps(self.figures.as_dict(), sort_keys=True))
        return "\n".join(lines)


class SimChannel:
    """A producer instance's check-back channel: checks queue up for the simulation to answer."""

    def __init__(self, sim: Simulation, name: str) -> None:
        self._sim = sim
        self.name = name
        self.open = True

    def send_check(self, message: MessageView, transaction_id: str) -> bool:
        if not self.open:
            return False
        if self._sim.rng.random() < 0.1:
            self._sim.faults_injected["check_lost"] = self._sim.faults_injected.get("check_lost", 0) + 1
            return True  # the check is lost on the way: the broker will check again later
        self._sim.pending_checks.append((message.body.decode(), transaction_id, message.message_id))
        return True

    def is_open(self) -> bool:
        return self.open


class Simulation:
    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.clock = FakeClock(start_ms=1_800_000_000_000)
        self.fs = CrashingFileSystem(random.Random(seed * 7919 + 1))
        self.net = FaultyNetwork(random.Random(seed * 104_729 + 2), self.config.network)
        self.history: list[dict[str, Any]] = []
        self.faults: list[str] = []
        self.faults_injected: dict[str, int] = {}
        self.pending_checks: list[tuple[str, str, str]] = []
        self.channels = {name: SimChannel(self, name) for name in ("p1", "p2")}
        self.broker: Broker | None = None
        self.step_index = 0
        self.disk_full_until = -1
        self.workload = Workload(self)

    # ---- plumbing ------------------------------------------------------------------------------
    def record(self, event: dict[str, Any]) -> None:
        event["t"] = self.clock.now_ms()
        self.history.append(event)

    def fault(self, description: str) -> None:
        kind = description.split()[0]
        self.faults_injected[kind] = self.faults_injected.get(kind, 0) + 1
        self.faults.append(f"step {self.step_index} t={self.clock.now_ms()}: {description}")
        self.record({"f": "fault", "type": "info", "fault": description})

    def broker_config(self) -> BrokerConfig:
        return BrokerConfig(
            data_dir="/sim",
            flush=FlushMode.SYNC,
            segment_bytes=64 * 1024,
            default_queues=QUEUES,
            transaction_timeout_ms=2_000,
            transaction_check_interval_ms=1_000,
            transaction_check_max=40,
            delay_levels=" ".join(f"{ms // 1000}s" for ms in DELAY_LEVELS_MS),
            max_delivery_attempts=1_000,
            retry_backoff_ms=(1_000, 2_000),
            receive_invisible_ms_min=1_000,  # the workload leases for 1-5 s to see expiries often
        )

    async def rpc(self, name: str, call: Any, *, allow_delay: bool = True) -> Any:
        assert self.broker is not None
        return await self.net.call(self.broker, name, call, allow_delay=allow_delay)

    # ---- broker lifecycle ----------------------------------------------------------------------
    async def open_broker(self) -> None:
        """Open (recovering whatever the disk holds), crashing again if a crash was armed."""
        for _ in range(10):
            try:
                self.broker = await Broker.open(
                    self.broker_config(), clock=self.clock, fs=self.fs, inline_flush=True
                )
                break
            except SimulatedCrash:
                self.power_cut("during recovery")
            except (OSError, TxmqError) as exc:  # refusing to start on a failing disk is allowed
                self.fault(f"open_failed {type(exc).__name__}: {exc}")
                self.operator_fixes(exc)
        else:
            raise AssertionError(f"seed {self.seed}: the broker did not come back: {self.faults[-1]}")
        self.broker.set_group_policy("gf", fifo=True)
        self.heartbeat()

    def operator_fixes(self, exc: BaseException) -> None:
        """What an operator does when the broker refuses to start: free the disk, and for damage in
        the middle of the log run ``txmq store repair --yes`` (after a power cut the damaged record and
        everything after it were never fsynced, so never acknowledged: the checker proves it)."""
        self.fs.heal()
        if isinstance(exc, CorruptRecord) and "middle of the CommitLog" in exc.message:
            result = repair_store(self.fs, "/sim/store", confirm=True)
            self.fault(f"operator_repair: {'; '.join(result.actions)}")

    def heartbeat(self) -> None:
        assert self.broker is not None
        for name, channel in self.channels.items():
            self.broker.clients.touch(name, kind=ClientKind.PRODUCER, groups={"pg"}, channel=channel)

    async def restart(self) -> None:
        assert self.broker is not None
        self.fault("restart (clean close, reopen)")
        try:
            await self.broker.close()
        except SimulatedCrash:
            self.power_cut("during close")
        except (OSError, TxmqError) as exc:
            self.fault(f"close_failed {type(exc).__name__}")
            self.power_cut("after a failed close")
        self.broker = None
        await self.open_broker()

    def power_cut(self, when: str) -> None:
        """The broker process dies: its object is dropped without close, unsynced data goes."""
        self.broker = None
        self.pending_checks.clear()
        self.fs.clear_injected_errors()  # an injected EIO belongs to the process that died
        mode = self.rng.choice(("lose", "torn", "flip"))
        done = self.fs.power_cut(mode)
        self.fault(f"crash {when}; power cut: {', '.join(done)}")

    async def tick(self) -> None:
        assert self.broker is not None
        try:
            await self.broker.tick(self.clock.now_ms())
        except (OSError, TxmqError) as exc:  # run_background logs these and runs the step again
            self.record({"f": "tick", "type": "info", "error": type(exc).__name__})

    # ---- faults --------------------------------------------------------------------------------
    async def maybe_fault(self) -> None:
        c, roll = self.config, self.rng.random()
        assert self.broker is not None
        if self.disk_full_until == self.step_index:
            self.fs.set_space_left(None)
            self.fault("disk_freed")
        for p, action in (
            (c.restart, "restart"),
            (c.crash_now, "crash_now"),
            (c.crash_armed, "arm"),
            (c.disk_full, "disk_full"),
            (c.fsync_error, "fsync_error"),
            (c.write_error, "write_error"),
        ):
            if roll < p:
                await self._inject(action)
                return
            roll -= p
        if self.broker.store.fenced and self.rng.random() < 0.3:
            await self.restart()

    async def _inject(self, action: str) -> None:
        if action == "restart":
            await self.restart()
        elif action == "crash_now":
            self.power_cut("between operations")
            await self.open_broker()
        elif action == "arm":
            operations = self.rng.randint(1, 12)
            self.fs.arm(operations)
            self.fault(f"armed crash at the {operations}th write or fsync from now")
        elif action == "disk_full":
            space = self.rng.randint(0, 3_000)
            self.fs.set_space_left(space)
            self.disk_full_until = self.step_index + self.rng.randint(1, 8)
            self.fault(f"disk_full after {space} bytes until step {self.disk_full_until}")
        elif action == "fsync_error":
            self.fs.fail_next_sync(errno.EIO)
            self.fault("fsync_error EIO on the next fsync")
        else:
            self.fs.fail_next_write(errno.EIO)
            self.fault("write_error EIO on the next write")

    # ---- the run -------------------------------------------------------------------------------
    async def run(self) -> SimResult:
        await self.open_broker()
        start_ms = self.clock.now_ms()
        for step_index in range(self.config.steps):
            self.step_index = step_index
            await self._guarded(self._step)
        await self._drain()
        figures = check(self.history)
        payload = json.dumps(self.history, sort_keys=True, separators=(",", ":")).encode()
        digest = hashlib.sha256(payload).hexdigest()[:16]
        if self.broker is not None:
            await self.broker.close()
        counters = {
            **{k: v for k, v in self.faults_injected.items() if k == "check_lost"},
            **self.net.injected,
        }
        return SimResult(
            self.seed, self.history, figures, self.faults, digest, self.clock.now_ms() - start_ms, counters
        )

    async def _guarded(self, step: Any) -> None:
        """Run one step; a crash at a write or fsync kills the broker, which then recovers."""
        try:
            await step()
        except SimulatedCrash:
            self.power_cut("at a write or fsync")
            await self.open_broker()

    async def _step(self) -> None:
        await self.maybe_fault()
        if self.broker is None:
            await self.open_broker()
        self.heartbeat()
        await self.workload.step()

    async def _drain(self) -> None:
        """Heal every fault, restart, then let time pass and consume until nothing is left."""
        self.fs.heal()
        self.net.heal()
        self.disk_full_until = -1
        await self._guarded(self.restart)
        if self.broker is None:
            await self.open_broker()
        await self._guarded(self.workload.settle_transactions)
        quiet = 0
        for round_index in range(self.config.drain_rounds_max):
            moved = await self._drain_round()
            quiet = quiet + 1 if not moved and round_index >= 12 else 0
            if quiet >= 3:
                break
        self.record(
            {
                "f": "end",
                "type": "info",
                "drained": {**{g: list(t) for g, t in POP_GROUPS.items()}, PULL_GROUP: list(PULL_TOPICS)},
            }
        )

    async def _drain_round(self) -> bool:
        assert self.broker is not None
        self.clock.advance(1_000)
        self.heartbeat()
        await self.tick()
        moved = await self.workload.answer_checks(reliable=True)
        for _ in range(len(self.net.delayed)):
            moved = True
            await self.workload.deliver_delayed()
        for group, topics in POP_GROUPS.items():
            for topic in topics:
                moved = await self.workload.consume_all(group, topic) or moved
        for topic in PULL_TOPICS:
            for queue in range(QUEUES):
                moved = await self.workload.pull(topic, queue, until_end=True) or moved
        pending = self.broker.transactions.list_pending()
        return moved or bool(pending) or any(self.broker.pop.inflight_of(g) for g in POP_GROUPS)


def run_seed(seed: int, config: SimConfig | None = None) -> SimResult:
    """Run one seed to completion in a fresh event loop."""
    return asyncio.run(Simulation(seed, config).run())


CTX = SendContext(producer_group="pg", born_host="10.0.0.9:40000")
