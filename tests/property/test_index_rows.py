"""A dispatched group's single appends in C: ``_batchenc.index_add_rows`` (every record's index keys
in one call, ``KeyIndex.add_rows``) against ``KeyIndex._add_keys_py`` record by record (the same
answer, the same head with items in the same order, arrays and pending bytes; nothing changed when
it declines), and ``_batchenc.put_unit`` against ``pending += UNIT.pack(...)``. Then the files: a
store fed the same appends (single ones in several queues, runs, batches, repeated keys, replays)
writes byte-identical ConsumeQueue and index files with the extension and without it
(``TXMQ_PURE=1``). The C tests are skipped where the extension is not built."""

from __future__ import annotations

import hashlib
import itertools
import struct
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import subprocess_env
from txmq.storage import codec
from txmq.storage.consume_queue import UNIT
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.index import KeyIndex

NATIVE: Any = codec.BATCHENC
needs_c = pytest.mark.skipif(NATIVE is None, reason="txmq.storage._batchenc is not built")

_KEYS = st.one_of(
    st.sampled_from(["k", "UNIQ-0A0B0C", "%TXOP%4242", "é-key", "x" * 128, "y" * 129, "", "日本", "z" * 300]),
    st.text("0123456789ABCDEF", min_size=32, max_size=34),
    st.text(max_size=6).filter(lambda key: key.isprintable()),
)
# one group: records (keys, gap to the previous offset, store time); gap 0 repeats an offset
_GROUP = st.lists(
    st.tuples(st.lists(_KEYS, max_size=4), st.integers(0, 40), st.integers(-(1 << 63), (1 << 63) - 1)),
    max_size=10,
)


def _index() -> KeyIndex:
    return KeyIndex(FaultyFileSystem(), "/data/index", lambda topic, properties: [])


def _state(index: KeyIndex) -> tuple[object, ...]:
    active = index.active
    return (
        list(active.head.items()),
        active.offsets.tobytes(),
        active.stamps.tobytes(),
        active.previous.tobytes(),
        bytes(index._pending),
        index.last_offset,
    )


def _reference(index: KeyIndex, rows: list[list[str]], offsets: list[int], stamps: list[int]) -> None:
    """What ``add`` does record by record, in Python (``_add_keys_py``), replays skipped."""
    for keys, offset, store_ms in zip(rows, offsets, stamps, strict=True):
        if offset > index._last_offset:
            index._last_offset = offset
            index._add_keys_py(keys, offset, store_ms)


@needs_c
@settings(max_examples=400, deadline=None)
@given(groups=st.lists(st.tuples(_GROUP, st.integers(-30, 30)), max_size=6))
@example(groups=[([(["a", "a", "b"], 1, 5), (["a"], 1, 6), (["b", "c"], 3, 7)], 0)])
def test_index_add_rows_makes_the_entries_record_by_record(groups: list[tuple[list[Any], int]]) -> None:
    """Group after group (each may start below the last one: a replay, which goes record by record),
    ``add_rows`` and the raw C call against the reference: same state after every group. Keys repeat
    within a record, across records of a group and across groups (the memo: equal text in new str
    objects); an offset repeated within a group makes the C call decline (nothing changed)."""
    python, native, raw = _index(), _index(), _index()
    offset = 0
    for records, shift in groups:
        offset = max(0, offset + shift)
        rows, offsets, stamps = [], [], []
        for keys, gap, store_ms in records:
            offset += gap
            rows.append(["".join(list(key)) for key in keys])
            offsets.append(offset)
            stamps.append(store_ms)
        _reference(python, rows, offsets, stamps)
        native.add_rows([tuple(row) for row in rows], list(offsets), list(stamps))
        ascending = all(b > a for a, b in itertools.pairwise(offsets))
        if offsets and offsets[0] > raw.last_offset:
            before = _state(raw)
            active = raw.active
            took = NATIVE.index_add_rows(
                active.head, active.offsets, active.stamps, active.previous, raw._pending, rows, offsets,
                stamps,
            )  # fmt: skip
            assert took is ascending  # it declines only what is off
            if took:
                raw._last_offset = offsets[-1]
            else:
                assert _state(raw) == before
                _reference(raw, rows, offsets, stamps)
        else:
            _reference(raw, rows, offsets, stamps)
        assert _state(native) == _state(python)
        assert _state(raw) == _state(python)
    for key in {key for records, _ in groups for keys, _, _ in records for key in keys}:
        digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
        assert NATIVE.key_digests([key]) == digest


@needs_c
def test_index_add_rows_hashes_many_keys_right() -> None:
    """More keys than the memo holds and more than four lanes, twice (the second time from the memo
    or hashed again after eviction), long keys among them: the entries hashlib's digests give."""
    python, native = _index(), _index()
    keys = [f"key-{i}" for i in range(700)] + ["é" * 200, "q" * 128, "r" * 129]
    for round_ in range(2):
        rows = [[key, keys[(i * 7) % len(keys)]] for i, key in enumerate(keys)]
        offsets = [round_ * 10_000 + i for i in range(len(keys))]
        stamps = [5 + i for i in range(len(keys))]
        _reference(python, rows, offsets, stamps)
        native.add_rows(rows, offsets, stamps)
        assert _state(native) == _state(python)


@needs_c
def test_index_add_rows_declines_what_it_cannot_take_and_add_rows_raises_as_add() -> None:
    """Rows the C call does not take answer False with nothing changed; ``add_rows`` then goes record
    by record, so a bad key raises what ``add`` raises, after the same entries."""
    for bad in ([b"bytes"], ["\ud800"]):
        python, native = _index(), _index()
        python.add("", b"", 3, 1, ["ok"])
        with pytest.raises((TypeError, UnicodeEncodeError)) as want:
            python.add("", b"", 7, 1, ["ok2", *bad])  # type: ignore[list-item]
        active = native.active
        assert not NATIVE.index_add_rows(
            active.head, active.offsets, active.stamps, active.previous, native._pending,
            [["ok"], ["ok2", *bad]], [3, 7], [1, 1],
        )  # fmt: skip
        assert _state(native) == _state(_index())
        with pytest.raises((TypeError, UnicodeEncodeError)) as got:
            native.add_rows([["ok"], ["ok2", *bad]], [3, 7], [1, 1])  # type: ignore[list-item]
        assert type(got.value) is type(want.value)
        assert str(got.value) == str(want.value)
        assert _state(native) == _state(python)
    entries = _index().active
    for args in (
        ([["a"]], [1 << 63], [0]),  # an offset outside int64
        ([["a"]], [1], [-(1 << 63) - 1]),
        ([["a"], ["b"]], [2, 2], [0, 0]),  # not ascending
        ([["a"]], [1, 2], [0]),  # lengths differ
        ([{"a"}], [1], [0]),  # a row that is not a tuple or list
        ((["a"],), [1], [0]),  # rows not a list
    ):
        pending = bytearray()
        active = (entries.head, entries.offsets, entries.stamps, entries.previous)
        assert NATIVE.index_add_rows(*active, pending, *args) is False
        assert not pending and not entries.head and not entries.offsets
    assert not NATIVE.index_add_rows({}, array("i"), array("q"), array("q"), bytearray(), [["a"]], [1], [0])
    with pytest.raises(TypeError):
        NATIVE.index_add_rows({}, array("q"), array("q"), array("q"), b"", [["a"]], [1], [0])
    with pytest.raises(TypeError):
        NATIVE.index_add_rows([], array("q"), array("q"), array("q"), bytearray(), [["a"]], [1], [0])


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    units=st.lists(
        st.tuples(
            st.integers(-(1 << 64), 1 << 64),
            st.integers(-(1 << 32), 1 << 32),
            st.integers(-(1 << 64), 1 << 64),
        ),
        max_size=6,
    )
)
def test_put_unit_appends_what_the_struct_packs(units: list[tuple[int, int, int]]) -> None:
    """``put_unit`` against ``pending += UNIT.pack(...)``: the same bytes, and for a value out of
    range a struct.error with the buffer unchanged."""
    want, got = bytearray(b"head"), bytearray(b"head")
    for offset, size, code in units:
        try:
            unit = UNIT.pack(offset, size, code)
        except struct.error:  # the same error class in the same cases (its text, as pack_units', may differ)
            with pytest.raises(struct.error):
                NATIVE.put_unit(got, offset, size, code)
        else:
            want += unit
            NATIVE.put_unit(got, offset, size, code)
        assert got == want
    with pytest.raises(struct.error):
        NATIVE.put_unit(got, "1", 2, 3)
    with pytest.raises(TypeError):
        NATIVE.put_unit(bytes(got), 1, 2, 3)


# A store fed single appends to several queues (each group one flush: its records dispatched
# together), runs in one queue, batches, keys given and left to the IndexKeysFn, keys repeated
# (a transaction's half and its message share UNIQ_KEY), a reopen (recovery replays over the
# index), then every ConsumeQueue and index file printed as hex.
_SCENARIO = r"""
import asyncio, os, random, sys
from txmq.common.clock import FakeClock
from txmq.storage import codec
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.fs import OsFileSystem
from txmq.storage.store import MessageStore

root = sys.argv[1]
rng = random.Random(7)
keys_fn = lambda topic, props: [p for p in props.decode().split(",") if p]
config = StoreConfig(data_dir=root, segment_bytes=1 << 20, consume_queue_units_per_file=16)
clock = FakeClock(1_700_000_000_000)
store = MessageStore.open(config, fs=OsFileSystem(), clock=clock, index_keys=keys_fn)
recent = []
def request(topic, queue_id):
    keys = [f"U{rng.randrange(10**6):06d}"] + (rng.sample(recent, 1) if recent and rng.random() < 0.4 else [])
    recent.extend(keys)
    del recent[:-20]
    props = ",".join(keys).encode()
    given = tuple(keys) if rng.random() < 0.7 else None
    return PutRequest(topic, queue_id, b"body%d" % rng.randrange(1000), props, rng.randrange(1 << 40),
                      index_keys=given)
for group in range(60):
    for _ in range(rng.randrange(1, 9)):
        kind = rng.random()
        if kind < 0.7:
            store.put_nowait(request(rng.choice(["T", "H", "OP"]), rng.randrange(3)))
        elif kind < 0.85:
            topic, queue_id = "R", rng.randrange(2)
            for _ in range(rng.randrange(2, 4)):
                store.put_nowait(request(topic, queue_id))
        else:
            store.put_batch_nowait([request("B", rng.randrange(2)) for _ in range(rng.randrange(1, 8))])
        if rng.random() < 0.3:
            clock.advance(rng.randrange(1, 5))
    store.flush()
    if group == 20:
        store.checkpoint()
    if group == 40:  # reopened: recovery replays what followed the checkpoint over queues and index
        asyncio.run(store.close())
        store = MessageStore.open(config, fs=OsFileSystem(), clock=clock, index_keys=keys_fn)
store.flush()
print("native", codec.BATCHENC is not None)
for base in ("consumequeue", "index"):
    for dirpath, _, names in sorted(os.walk(os.path.join(root, base))):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            print(os.path.relpath(path, root), open(path, "rb").read().hex())
"""


def _files(tmp_path: Path, pure: bool) -> list[str]:
    root = tmp_path / ("pure" if pure else "native")
    env = subprocess_env(tmp_path)
    env.pop("TXMQ_PURE", None)
    if pure:
        env["TXMQ_PURE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", _SCENARIO, str(root)], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


@needs_c
def test_store_files_are_byte_identical_with_and_without_the_extension(tmp_path: Path) -> None:
    native, pure = _files(tmp_path, pure=False), _files(tmp_path, pure=True)
    assert native[0] == "native True" and pure[0] == "native False"
    assert len(native) > 10  # queue files and index files, several of each
    assert any(line.startswith("index/") for line in native)
    assert native[1:] == pure[1:]
