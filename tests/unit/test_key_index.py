"""The key index on a real disk: sealed files get sorted companions, memory holds only the active
file, and an index written with bigger files (the old 1,000,000-entry layout) still answers."""

from __future__ import annotations

import os
from pathlib import Path

from txmq.storage.fs import FaultyFileSystem, OsFileSystem
from txmq.storage.index import KeyIndex, key_hash, key_hashes
from txmq.storage.index_sealed import ENTRY, SORTED_SUFFIX, open_sealed


def keys_of(topic: str, properties: bytes) -> list[str]:
    return properties.decode().split()


def _fill(index: KeyIndex, records: int) -> None:
    for number in range(records):
        index.add("T", f"k{number % 10} id{number}".encode(), number * 100, 1000 + number)
        if number % 5 == 4:
            index.write()
    index.write()
    index.sync()


def test_full_files_are_sealed_with_companions_and_only_the_active_file_is_in_memory(tmp_path: Path) -> None:
    index = KeyIndex(OsFileSystem(), str(tmp_path), keys_of, entries_per_file=16)
    index.load()
    _fill(index, 100)  # 200 entries: 12 sealed files and 8 entries in the active one
    names = sorted(os.listdir(tmp_path))
    assert len([name for name in names if name.endswith(SORTED_SUFFIX)]) == 12
    assert len([name for name in names if name.isdigit()]) == 13
    assert len(index.active) == 8
    assert index.lookup("k3", 1000, 0, 10**9, 0) == [number * 100 for number in range(93, -1, -10)]
    assert index.lookup("id57", 10, 0, 10**9, 0) == [5700]
    assert index.lookup("k3", 2, 1020, 1050, 0) == [4300, 3300]
    assert index.lookup("absent", 10, 0, 10**9, 0) == []
    index.close()


def test_an_index_with_larger_files_reopens_with_the_same_answers(tmp_path: Path) -> None:
    fs = OsFileSystem()
    old = KeyIndex(fs, str(tmp_path), keys_of, entries_per_file=64)
    old.load()
    _fill(old, 100)
    expected = {key: old.lookup(key, 1000, 0, 10**9, 0) for key in ("k0", "k7", "id99", "id3")}
    old.close()
    reopened = KeyIndex(fs, str(tmp_path), keys_of, entries_per_file=16)
    reopened.load()
    assert {key: reopened.lookup(key, 1000, 0, 10**9, 0) for key in expected} == expected
    assert len(reopened.active) <= 16
    _fill_more = [reopened.add("T", b"k0", 20_000 + number, 5000) for number in range(40)]
    assert len(_fill_more) == 40
    reopened.write()
    assert reopened.lookup("k0", 3, 0, 10**9, 0) == [20_039, 20_038, 20_037]
    reopened.close()


def test_a_truncation_into_a_sealed_file_unseals_it(tmp_path: Path) -> None:
    index = KeyIndex(OsFileSystem(), str(tmp_path), keys_of, entries_per_file=16)
    index.load()
    _fill(index, 100)
    index.truncate_from_physical(1250)  # inside the second file (entries 16..31 are records 8..15)
    names = sorted(os.listdir(tmp_path))
    assert [name for name in names if name.endswith(SORTED_SUFFIX)] == [names[0] + SORTED_SUFFIX]
    assert index.lookup("k2", 1000, 0, 10**9, 0) == [1200, 200]
    assert index.lookup("k3", 1000, 0, 10**9, 0) == [300]
    index.add("T", b"k3", 1250, 7)
    index.write()
    assert index.lookup("k3", 1000, 0, 10**9, 0) == [1250, 300]
    index.close()


def test_a_sealed_file_tells_apart_hashes_that_share_their_32_bit_prefix() -> None:
    fs = FaultyFileSystem()
    fs.makedirs("/i")
    handle = fs.open("/i/00000000000000000000")
    shared = 0xDEADBEEF << 32
    entries = [
        (shared | 1, 10, 1),
        (5, 20, 2),
        (shared | 2, 30, 3),
        (shared | 1, 40, 4),
        (shared + (1 << 32), 50, 5),
    ]
    handle.append(b"".join(ENTRY.pack(*entry) for entry in entries))
    handle.close()
    sealed = open_sealed(fs, "/i/00000000000000000000")  # no companion yet: built from the entry file
    assert sealed.matches(shared | 1) == [(10, 1), (40, 4)]
    assert sealed.matches(shared | 2) == [(30, 3)]
    assert sealed.matches(shared | 3) == []
    assert sealed.matches(5) == [(20, 2)]
    assert sealed.matches(shared + (1 << 32)) == [(50, 5)]
    assert sealed.last_offset == 50
    sealed.close()


def test_key_hashes_are_key_hash_of_every_key() -> None:
    """A batch's keys hashed at once: the same numbers, in order, as one key at a time."""
    keys = ["", "k", "ключ", "é" * 40, *(f"{i:032X}" for i in range(70)), "k"]
    assert key_hashes(keys) == [key_hash(k) for k in keys]
    assert key_hashes([]) == []


def test_a_small_batch_indexes_exactly_as_record_by_record() -> None:
    """add_batch of a few records (a commit's message and op record) takes the record-by-record path:
    the same entries in memory and the same bytes written as add() of each record, including a key
    repeated inside the batch, a key already indexed, a record without keys and known keys."""
    batches: list[tuple[list[str], list[bytes], list[int], list[tuple[str, ...] | None]]] = [
        (["T", "T"], [b"u1", b"op1"], [0, 100], [None, None]),
        (["T", "T"], [b"u2 k", b"op2"], [200, 300], [("u2", "k"), None]),
        (["T", "T", "T"], [b"k", b"", b"k u1"], [400, 500, 600], [None, None, None]),
        (["T"], [b"k"], [700], [("k",)]),
        (["T", "T", "T", "T"], [b"a", b"a", b"b", b"a"], [800, 900, 1000, 1100], [None, None, None, None]),
    ]
    fs_batch, fs_single = FaultyFileSystem(), FaultyFileSystem()
    batched = KeyIndex(fs_batch, "/i", keys_of, entries_per_file=64)
    single = KeyIndex(fs_single, "/i", keys_of, entries_per_file=64)
    batched.load()
    single.load()
    for topics, properties, offsets, keys in batches:
        batched.add_batch(topics, properties, offsets, 5, keys)
        for topic, props, offset, given in zip(topics, properties, offsets, keys, strict=True):
            single.add(topic, props, offset, 5, given)
        batched.write()
        single.write()
    batched.add_batch(["T", "T"], [b"k", b"z"], [1100, 1200], 5, [None, None])  # a replay reaching in
    single.add("T", b"k", 1100, 5)
    single.add("T", b"z", 1200, 5)
    batched.write()
    single.write()
    batched.sync()
    single.sync()
    assert fs_batch.read_file("/i/" + fs_batch.list_dir("/i")[0]) == fs_single.read_file(
        "/i/" + fs_single.list_dir("/i")[0]
    )
    for key in ("u1", "op1", "u2", "k", "a", "b", "z"):
        assert batched.lookup(key, 100, 0, 10, 0) == single.lookup(key, 100, 0, 10, 0)
    assert batched.lookup("k", 100, 0, 10, 0) == [700, 600, 400, 200]  # 1100 was already indexed
    batched.close()
    single.close()
