"""A stateful model check of the key index against a list of (key, offset, store_ms) in log order.

Small files (7 entries) make every run cross seal boundaries; rules cut the tail (recovery), retire
the head (retention), reload from disk, and damage or delete a sealed file's sorted companion before a
reload. Every lookup must equal the model's answer,
which is the old all-in-memory algorithm: newest first, stop at ``max_count`` or below ``min_offset``.
"""

from __future__ import annotations

import posixpath
import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from txmq.storage.fs import FaultyFileSystem
from txmq.storage.index import KeyIndex
from txmq.storage.index_sealed import SORTED_SUFFIX

DIRECTORY = "/data/index"
KEYS = ["a", "b", "c", "d", "e"]
ENTRIES_PER_FILE = 7


def keys_of(topic: str, properties: bytes) -> list[str]:
    return properties.decode().split()


def model_lookup(
    model: list[tuple[str, int, int]], key: str, max_count: int, begin_ms: int, end_ms: int, min_offset: int
) -> list[int]:
    result: list[int] = []
    for entry_key, offset, store_ms in reversed(model):
        if entry_key != key:
            continue
        if len(result) >= max_count or offset < min_offset:
            break
        if begin_ms <= store_ms <= end_ms:
            result.append(offset)
    return result


class KeyIndexModel(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**32 - 1))
    def setup(self, seed: int) -> None:
        self.fs = FaultyFileSystem(random.Random(seed))
        self.index = self._open()
        self.model: list[tuple[str, int, int]] = []
        self.next_offset = 0
        self.floor = 0  # what the store passes as min_offset: the log's first offset
        self.synced_offset = 0  # every entry below it is durable

    def _open(self) -> KeyIndex:
        index = KeyIndex(self.fs, DIRECTORY, keys_of, ENTRIES_PER_FILE)
        index.load()
        return index

    @rule(
        records=st.lists(
            st.tuples(st.lists(st.sampled_from(KEYS), max_size=3), st.integers(1, 50), st.integers(0, 40)),
            min_size=1,
            max_size=12,
        )
    )
    def add_batch(self, records: list[tuple[list[str], int, int]]) -> None:
        for keys, step, store_ms in records:
            offset = self.next_offset
            self.index.add("T", " ".join(keys).encode(), offset, store_ms)
            self.model.extend((key, offset, store_ms) for key in dict.fromkeys(keys))
            self.next_offset = offset + step
        self.index.write()

    @rule()
    def sync(self) -> None:
        self.index.sync()
        self.synced_offset = self.next_offset

    @rule()
    def crash_and_recover(self) -> None:
        """A power cut keeps a random prefix of unsynced bytes; recovery cuts back to a durable point."""
        self.index.close()
        self.fs.crash()
        self.index = self._open()
        cut = max(self.synced_offset, self.floor)
        self.index.truncate_from_physical(cut)
        self.model = [entry for entry in self.model if entry[1] < cut]
        self.next_offset = cut
        self.synced_offset = min(self.synced_offset, cut)

    @rule(fraction=st.floats(0, 1))
    def truncate(self, fraction: float) -> None:
        cut = self.floor + int((self.next_offset - self.floor) * fraction)
        self.index.truncate_from_physical(cut)
        self.model = [entry for entry in self.model if entry[1] < cut]
        self.next_offset = cut
        self.synced_offset = min(self.synced_offset, cut)

    @rule(fraction=st.floats(0, 1))
    def retire(self, fraction: float) -> None:
        self.floor = max(self.floor, int(self.next_offset * fraction))
        self.index.retire_below(self.floor)

    @rule()
    def reload(self) -> None:
        self.index.sync()
        self.index.close()
        self.index = self._open()

    @rule(
        which=st.integers(0, 100),
        damage=st.sampled_from(["remove", "flip", "tear"]),
        at=st.integers(0, 10_000),
    )
    def damage_companion_and_reload(self, which: int, damage: str, at: int) -> None:
        self.index.sync()
        self.index.close()
        companions = sorted(name for name in self.fs.list_dir(DIRECTORY) if name.endswith(SORTED_SUFFIX))
        if companions:
            path = posixpath.join(DIRECTORY, companions[which % len(companions)])
            size = len(self.fs.read_file(path))
            if damage == "remove":
                self.fs.remove(path)
            elif damage == "flip":
                self.fs.flip_bit(path, at % size, at % 8)
            else:
                handle = self.fs.open(path)
                handle.truncate(at % size)
                handle.sync()
                handle.close()
        self.index = self._open()

    @invariant()
    def lookups_match_the_model(self) -> None:
        if not hasattr(self, "index"):
            return
        for key in KEYS:
            for max_count, begin_ms, end_ms in ((1000, 0, 40), (2, 0, 40), (3, 10, 25), (0, 0, 40)):
                expected = model_lookup(self.model, key, max_count, begin_ms, end_ms, self.floor)
                assert self.index.lookup(key, max_count, begin_ms, end_ms, self.floor) == expected

    @invariant()
    def memory_holds_only_the_active_file(self) -> None:
        if hasattr(self, "index"):
            assert len(self.index.active) <= ENTRIES_PER_FILE

    def teardown(self) -> None:
        if hasattr(self, "index"):
            self.index.close()


KeyIndexModel.TestCase.settings = settings(max_examples=120, stateful_step_count=30, deadline=None)
TestKeyIndexModel = KeyIndexModel.TestCase
