"""The key index's batch of fresh keys in one C call (``_batchenc.index_add_fresh``) against its
reference, the columnar path of ``KeyIndex.add_batch`` in Python (``key_digests_py``,
``ActiveEntries.extend_new``, the entries packed): the same answer, the same head (items in the same
order), arrays and pending bytes; when it answers False nothing changed. And ``add_batch`` as a whole
against ``add`` record by record, for batches the C call takes and ones it leaves to the general
path. Skipped when the extension is not built (no compiler, ``TXMQ_PURE=1``)."""

from __future__ import annotations

import struct
from array import array
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.storage import codec
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.index import ActiveEntries, KeyIndex, key_digests_py, key_hash
from txmq.storage.index_sealed import ENTRY

NATIVE: Any = codec.BATCHENC
pytestmark = pytest.mark.skipif(NATIVE is None, reason="txmq.storage._batchenc is not built")

_KEYS = st.one_of(
    st.sampled_from(["k", "a", "b", "", "ключ", "\ud800", "x" * 200]),
    st.text("0123456789ABCDEF", min_size=32, max_size=34),
    st.text(max_size=6),
)
_ROWS = st.lists(st.one_of(st.tuples(), st.tuples(_KEYS), st.tuples(_KEYS, _KEYS), st.none()), max_size=8)


def _reference(
    entries: ActiveEntries, pending: bytearray, rows: list[tuple[str, ...]], offsets: list[int], store_ms: int
) -> bool:
    flat = [key for row in rows for key in row]
    key_offsets = [offset for row, offset in zip(rows, offsets, strict=True) for _ in row]
    if not flat:
        return True
    hashes = list(struct.unpack(f">{len(flat)}Q", b"".join(key_digests_py(flat))))
    if not entries.extend_new(hashes, key_offsets, store_ms):
        return False
    pending += b"".join(ENTRY.pack(h, o, store_ms) for h, o in zip(hashes, key_offsets, strict=True))
    return True


def _state(entries: ActiveEntries, pending: bytearray) -> tuple[object, ...]:
    return list(entries.head.items()), entries.offsets, entries.stamps, entries.previous, bytes(pending)


@settings(max_examples=400, deadline=None)
@given(present=st.lists(_KEYS, max_size=4), rows=_ROWS, store_ms=st.integers(0, 2**45))
@example(present=[], rows=[("a",), ("b", "c")], store_ms=5)
@example(present=["b"], rows=[("a",), ("b",)], store_ms=5)  # a known key: False
@example(present=[], rows=[("a",), ("a",)], store_ms=5)  # a repeated key: False
@example(present=[], rows=[("a",), ("\ud800",)], store_ms=5)  # not UTF-8: False
@example(present=[], rows=[(), ()], store_ms=5)  # no key at all: True
def test_fresh_keys_in_one_call_are_the_reference(present: list[str], rows: list[Any], store_ms: int) -> None:
    offsets = [1000 + 100 * i for i in range(len(rows))]
    python, native = ActiveEntries(), ActiveEntries()
    for entries in (python, native):
        for i, key in enumerate(present):
            try:
                entries.append(key_hash(key), 10 + i, 7)
            except UnicodeEncodeError:
                pass
    python_pending, native_pending = bytearray(b"p"), bytearray(b"p")
    before = _state(native, native_pending)
    got = NATIVE.index_add_fresh(
        native.head, native.offsets, native.stamps, native.previous, native_pending, rows, offsets, store_ms
    )
    if any(row is None for row in rows) or any(
        not key.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in key)
        for row in rows
        if row
        for key in row
    ):
        assert got is False  # left to the general path
        assert _state(native, native_pending) == before
        return
    want = _reference(python, python_pending, rows, offsets, store_ms)
    assert got is want
    assert _state(native, native_pending) == _state(python, python_pending)
    if not got:
        assert _state(native, native_pending) == before


def test_what_it_leaves_to_the_general_path_changes_nothing() -> None:
    entries, pending = ActiveEntries(), bytearray()

    def call(rows: object, offsets: object, stamps: object = None, store_ms: object = 5) -> object:
        return NATIVE.index_add_fresh(
            entries.head, entries.offsets, entries.stamps if stamps is None else stamps, entries.previous,
            pending, rows, offsets, store_ms,
        )  # fmt: skip

    assert call([("a",), ("b",)], [1]) is False  # lengths differ
    assert call([("a",), 5], [1, 2]) is False  # a row that is not a tuple or list
    assert call([("a",), (5,)], [1, 2]) is False  # a key that is not a str
    assert call([("a",)], [2**63]) is False  # an offset outside int64
    assert call([("a",)], [1], store_ms=2**64) is False
    assert call([("a",)], [1], stamps=array("i")) is False  # not array('q')
    assert (entries.head, len(entries.offsets), bytes(pending)) == ({}, 0, b"")
    with pytest.raises(TypeError):
        NATIVE.index_add_fresh([], entries.offsets, entries.stamps, entries.previous, pending, [], [], 5)
    assert call([["a", "b"], ()], [1, 2]) is True  # lists too
    assert len(entries.offsets) == 2 and len(pending) == 48


def _keys_of(topic: str, properties: bytes) -> list[str]:
    return properties.decode().split()


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(
        st.lists(
            st.one_of(st.none(), st.lists(st.sampled_from(["a", "b", "k", "u1", "u2"]), max_size=2)),
            min_size=1,
            max_size=10,
        ),
        min_size=1,
        max_size=5,
    ),
    fresh=st.booleans(),
)
def test_add_batch_is_add_record_by_record(batches: list[list[list[str] | None]], fresh: bool) -> None:
    """``KeyIndex.add_batch`` (its C call when every key is known and fresh, else the general path)
    gives the entries in memory and the bytes written that ``add`` of each record gives."""
    batched = KeyIndex(FaultyFileSystem(), "/i", _keys_of, entries_per_file=64)
    single = KeyIndex(FaultyFileSystem(), "/i", _keys_of, entries_per_file=64)
    batched.load()
    single.load()
    offset = 0
    for n, batch in enumerate(batches):
        rows = [
            None if keys is None else tuple(f"{key}-{n}-{i}" if fresh else key for key in keys)
            for i, keys in enumerate(batch)
        ]
        properties = [b"p q" if row is None else " ".join(row).encode() for row in rows]
        offsets = [offset + 100 * i for i in range(len(rows))]
        offset += 100 * len(rows)
        batched.add_batch(["T"] * len(rows), properties, offsets, 5 + n, rows)
        for props, at, row in zip(properties, offsets, rows, strict=True):
            single.add("T", props, at, 5 + n, row)
        batched.write()
        single.write()
        active, other = batched.active, single.active
        assert list(active.head.items()) == list(other.head.items())
        assert (active.offsets, active.stamps, active.previous) == (
            other.offsets,
            other.stamps,
            other.previous,
        )
    batched.sync()
    single.sync()
    for key in ("a", "b", "k", "u1", "p", "q", "a-0-0", "b-1-2"):
        assert batched.lookup(key, 10**6, 0, 100, 0) == single.lookup(key, 10**6, 0, 100, 0)
