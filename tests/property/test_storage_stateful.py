"""A stateful model check: the store on a FaultyFileSystem against a dict model, across single and
batch appends, flushes, checkpoints, power cuts (with torn tails) and clean restarts.

Invariants: every acknowledged (flushed) record survives every crash; what survives beyond the
acknowledged records is a prefix of what was written (no gaps); queue offsets are dense; reads
return exactly what was written.
"""

from __future__ import annotations

import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from txmq.common.clock import FakeClock
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

DATA = "/data"
CONFIG = StoreConfig(data_dir=DATA, segment_bytes=4096, consume_queue_units_per_file=4)
KEYS = [("A", 0), ("A", 1), ("B", 0)]

Key = tuple[str, int]


class StoreModel(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**32 - 1))
    def setup(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.fs = FaultyFileSystem(random.Random(seed))
        self.clock = FakeClock()
        self.store = MessageStore.open(CONFIG, fs=self.fs, clock=self.clock)
        self.acked: dict[Key, list[bytes]] = {key: [] for key in KEYS}
        self.pending: list[tuple[Key, bytes]] = []
        self.counter = 0

    def _request(self, key_index: int, size: int) -> tuple[Key, PutRequest]:
        key = KEYS[key_index]
        self.counter += 1
        body = b"%06d:" % self.counter + b"x" * size
        return key, PutRequest(key[0], key[1], body, b"n\x01%d\x02" % self.counter)

    @rule(key_index=st.integers(0, 2), size=st.integers(0, 700))
    def append(self, key_index: int, size: int) -> None:
        key, req = self._request(key_index, size)
        result, _ = self.store.put_nowait(req)
        assert result.queue_offset == len(self.acked[key]) + sum(1 for k, _ in self.pending if k == key)
        self.pending.append((key, req.body))
        self.clock.advance(1)

    @rule(keys=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 300)), min_size=1, max_size=5))
    def append_batch(self, keys: list[tuple[int, int]]) -> None:
        batch = [self._request(k, size) for k, size in keys]
        results, _ = self.store.put_batch_nowait([r for _, r in batch])
        assert len({r.physical_offset // CONFIG.segment_bytes for r in results}) == 1
        self.pending.extend((key, req.body) for key, req in batch)

    @rule()
    def flush(self) -> None:
        self.store.flush()
        for key, body in self.pending:
            self.acked[key].append(body)
        self.pending.clear()

    @rule()
    def checkpoint(self) -> None:
        self.store.checkpoint()

    @rule(torn=st.booleans())
    def power_cut(self, torn: bool) -> None:
        self._crash(torn)
        self.store = MessageStore.open(CONFIG, fs=self.fs, clock=self.clock)
        self._adopt_survivors()

    @rule()
    def clean_restart(self) -> None:
        self.flush()
        self.store.checkpoint()
        self.store = MessageStore.open(CONFIG, fs=self.fs, clock=self.clock)
        assert self.store.recovery_report.records_scanned == 0, "a clean restart replays nothing"

    def _crash(self, torn: bool) -> None:
        """Lose unsynced bytes; with ``torn``, the active segment keeps a random unsynced prefix
        (only when no other segment has unsynced bytes: the flusher syncs oldest first)."""
        segments = sorted(p for p in self.fs.files if "/commitlog/" in p)
        others_clean = all(self.fs.files[p].data == self.fs.files[p].durable for p in segments[:-1])
        for path, file in self.fs.files.items():
            keep = len(file.durable)
            is_tail = bool(segments) and path == segments[-1] and others_clean
            partial_ok = is_tail or "/commitlog/" not in path
            if torn and partial_ok and file.data[:keep] == file.durable:
                keep = self.rng.randint(keep, len(file.data))
            file.data = file.data[:keep] if keep > len(file.durable) else bytearray(file.durable)
            file.durable = bytes(file.data)

    def _adopt_survivors(self) -> None:
        survived: dict[Key, list[bytes]] = {key: self._bodies(key) for key in KEYS}
        extra_count = 0
        for key in KEYS:
            assert survived[key][: len(self.acked[key])] == self.acked[key], "an acknowledged record was lost"
            extra_count += len(survived[key]) - len(self.acked[key])
        expected: dict[Key, list[bytes]] = {key: list(self.acked[key]) for key in KEYS}
        for key, body in self.pending[:extra_count]:
            expected[key].append(body)
        assert survived == expected, (
            "survivors beyond the acknowledged records must be a prefix of the writes"
        )
        self.acked = survived
        self.pending.clear()

    def _bodies(self, key: Key) -> list[bytes]:
        read = self.store.read_queue(key[0], key[1], 0, 1000)
        assert [r.queue_offset for r in read.records] == list(range(len(read.records))), "dense offsets"
        return [r.body for r in read.records]

    @invariant()
    def visible_matches_acknowledged(self) -> None:
        if not hasattr(self, "store"):
            return
        for key in KEYS:
            assert self.store.max_offset(*key) == len(self.acked[key]), "nothing unflushed is visible"
        assert self.store.dispatched_offset <= self.store.flushed_offset


StoreModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestStoreModel = StoreModel.TestCase
