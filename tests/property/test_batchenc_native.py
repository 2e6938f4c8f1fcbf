"""The C loops of a batched append (``txmq.storage._batchenc``) against their Python references: the
batch encoder against ``codec.encode_batch_into_py`` and ``codec.encode`` record by record (same bytes,
same offsets, nothing written outside the batch, a short buffer refused and never overrun, a size
that is not its record's refused, an out-of-range field refused as struct does), CRC32C (SSE4.2 and
table) against ``crc32c.crc32c``, the blake2b-8 key digests against hashlib, the index entries
against ``ENTRY``, the send lane's offset message ids against ``_HEX16``, a run's ConsumeQueue units
against ``consume_queue.pack_units_py``, the key index's head extended in C against
``ActiveEntries.extend_new``, one record's index entries (``index_add``) against
``KeyIndex._add_keys_py``.

Skipped where the extension is not built (a pure install, ``TXMQ_PURE=1``): the Python paths are then
the ones that run, and ``test_batch_append.py`` holds them to ``codec.encode``."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
from array import array
from pathlib import Path
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import subprocess_env
from txmq.broker.send import _HEX16, _hex16s, offset_ids
from txmq.storage import codec
from txmq.storage.consume_queue import pack_units, pack_units_py
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.index import ActiveEntries, KeyIndex, key_digests_py, key_hash, key_hashes
from txmq.storage.index_sealed import ENTRY

NATIVE: Any = codec.BATCHENC
pytestmark = pytest.mark.skipif(NATIVE is None, reason="txmq.storage._batchenc is not built")

NOW_MS = 1_700_000_000_000
STORE_HOST = b"10.1.2.3:10911"

fields_strategy = st.builds(
    codec.RecordFields,
    topic=st.sampled_from([b"T", b"Topic", b"TopicLonger", "é".encode()]),
    queue_id=st.integers(-(1 << 31), (1 << 31) - 1),
    body=st.binary(max_size=300),
    properties=st.binary(max_size=40),
    tags_code=st.integers(-(1 << 63), (1 << 63) - 1),
    flag=st.integers(-(1 << 31), (1 << 31) - 1),
    sys_flag=st.integers(-(1 << 31), (1 << 31) - 1),
    born_timestamp_ms=st.integers(-(1 << 63), (1 << 63) - 1),
    born_host=st.sampled_from([b"", b"h:1", b"10.0.0.2:5555"]),
    reconsume_times=st.integers(-(1 << 31), (1 << 31) - 1),
    prepared_transaction_offset=st.integers(-(1 << 63), (1 << 63) - 1),
    index_keys=st.just(()),
)


def _as(kind: str, data: bytes) -> Any:
    if kind == "bytearray":
        return bytearray(data)
    return memoryview(b"<" + data + b">")[1:-1] if kind == "memoryview" else data


def _encode(records: list[codec.RecordFields], pos: int, physical: int, first: int, native: bool,
            store_ms: int = NOW_MS, pad: int = 5) -> tuple[bytearray, list[int], list[int]]:  # fmt: skip
    cols = codec.columns(records)
    sizes = codec.batch_sizes(cols, STORE_HOST)
    buf = bytearray(b"\xee" * (pos + sum(sizes) + pad))
    encode = codec.encode_batch_into if native else codec.encode_batch_into_py
    queue_offsets = range(first, first + len(records))
    offsets = encode(buf, pos, physical, cols, sizes, store_host=STORE_HOST, queue_offsets=queue_offsets,
                     store_timestamp_ms=store_ms)  # fmt: skip
    return buf, offsets, sizes


@settings(max_examples=400, deadline=None)
@given(
    records=st.lists(fields_strategy, min_size=1, max_size=12),
    uniform=st.booleans(),
    kind=st.sampled_from(["bytes", "bytearray", "memoryview"]),
    pos=st.integers(0, 9),
    physical=st.integers(0, 1 << 62),
    first=st.integers(0, 1 << 62),
    store_ms=st.integers(-(1 << 63), (1 << 63) - 1),
)
def test_the_c_encoder_writes_the_python_encoders_bytes(
    records: list[codec.RecordFields], uniform: bool, kind: str, pos: int, physical: int, first: int,
    store_ms: int,
) -> None:  # fmt: skip
    if uniform:  # the send lane's batch: every header field one value, properties and bodies differ
        records = [records[0]._replace(properties=r.properties, body=r.body) for r in records]
    records = [r._replace(body=_as(kind, r.body)) for r in records]  # properties: bytes (struct's "s")
    got, offsets, sizes = _encode(records, pos, physical, first, native=True, store_ms=store_ms)
    want, want_offsets, _ = _encode(records, pos, physical, first, native=False, store_ms=store_ms)
    assert got == want  # nothing outside [pos, pos + total) is touched either: both pad with 0xee
    assert offsets == want_offsets == [physical + sum(sizes[:i]) for i in range(len(records))]
    plain = [r._replace(body=bytes(r.body)) for r in records]
    each = b"".join(
        codec.encode(
            r,
            store_host=STORE_HOST,
            queue_offset=first + i,
            physical_offset=offset,
            store_timestamp_ms=store_ms,
        )
        for i, (r, offset) in enumerate(zip(plain, offsets, strict=True))
    )
    assert bytes(got[pos : pos + sum(sizes)]) == each


@settings(max_examples=200, deadline=None)
@given(records=st.lists(fields_strategy, min_size=1, max_size=6), pos=st.integers(0, 9), data=st.data())
def test_a_buffer_too_short_for_the_batch_is_refused_and_never_overrun(
    records: list[codec.RecordFields], pos: int, data: st.DataObject
) -> None:
    """The C loop checks every record against the buffer's end before writing it: a buffer short by
    any number of bytes raises struct.error, with only the records that fit written (as the Python
    encoder leaves them; the log does not advance its fill), never a byte past the end."""
    cols = codec.columns(records)
    sizes = codec.batch_sizes(cols, STORE_HOST)
    total = sum(sizes)
    short = data.draw(st.integers(1, total + pos))
    buf = bytearray(b"\xee" * (pos + total - short))
    with pytest.raises(struct.error):
        NATIVE.encode_batch(buf, pos, 0, sizes, cols[1], cols[5], range(len(records)), cols[6], cols[7],
                            NOW_MS, cols[4], cols[9], cols[10], [_names(r) for r in records], cols[3],
                            cols[2])  # fmt: skip
    assert len(buf) == pos + total - short
    whole, _, _ = _encode(records, pos, 0, 0, native=False, pad=0)
    fit = 0
    while fit < len(sizes) and pos + sum(sizes[: fit + 1]) <= len(buf):
        fit += 1
    end = pos + sum(sizes[:fit])
    assert buf[:end] == (b"\xee" * pos + whole[pos:end])[: len(buf)]
    assert buf[end:] == b"\xee" * (len(buf) - end)


def _names(r: codec.RecordFields) -> bytes:
    return codec._names_part(r.topic, r.born_host, STORE_HOST)


def _call(records: list[codec.RecordFields], sizes: list[int] | None = None, pos: int = 0,
          names: list[bytes] | None = None) -> bytearray:  # fmt: skip
    cols = codec.columns(records)
    real = codec.batch_sizes(cols, STORE_HOST)
    buf = bytearray(pos + sum(real) + 64)
    names_col = [_names(r) for r in records] if names is None else names
    NATIVE.encode_batch(buf, pos, 0, real if sizes is None else sizes, cols[1], cols[5], range(len(records)),
                        cols[6], cols[7], NOW_MS, cols[4], cols[9], cols[10], names_col, cols[3],
                        cols[2])  # fmt: skip
    return buf


def test_a_size_that_is_not_its_records_is_refused() -> None:
    record = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, NOW_MS, b"h:1", 0, 0, ())
    size = codec.batch_sizes(codec.columns([record]), STORE_HOST)[0]
    for wrong in (size - 1, size + 1, 0, -1, 1 << 40):
        with pytest.raises(ValueError, match="size"):
            _call([record], sizes=[wrong])


def test_bad_arguments_raise_and_write_nothing() -> None:
    record = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, NOW_MS, b"h:1", 0, 0, ())
    with pytest.raises(ValueError, match="differ in length"):
        _call([record, record], sizes=[100])
    with pytest.raises(struct.error, match="pos"):
        _call([record], pos=-1)
    with pytest.raises(TypeError):
        _call([record], names=[None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        _call([record._replace(body="text")])  # type: ignore[arg-type]
    with pytest.raises(struct.error):
        _call([record._replace(born_timestamp_ms="1")])  # type: ignore[arg-type]
    with pytest.raises(BufferError):
        NATIVE.encode_batch(b"read-only", 0, 0, [], [], [], [], [], [], 0, [], [], [], [], [], [])
    assert NATIVE.encode_batch(bytearray(1), 1, 0, [], [], [], [], [], [], 0, [], [], [], [], [], []) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queue_id", 1 << 31), ("queue_id", -(1 << 31) - 1), ("flag", 1 << 40), ("sys_flag", -(1 << 31) - 1),
        ("reconsume_times", 1 << 31), ("tags_code", 1 << 63), ("born_timestamp_ms", -(1 << 63) - 1),
        ("prepared_transaction_offset", 1 << 64), ("properties", b"p" * 65536),
    ],
)  # fmt: skip
def test_an_out_of_range_field_raises_struct_error_as_the_python_encoder_does(field: str, value: Any) -> None:
    record = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, NOW_MS, b"h:1", 0, 0, ())
    bad = record._replace(**{field: value})
    for native in (True, False):
        with pytest.raises(struct.error):
            _encode([record, bad], 0, 0, 0, native=native)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=600), value=st.integers(0, 0xFFFFFFFF), skip=st.integers(0, 7))
def test_crc32c_is_the_crc32c_packages(data: bytes, value: int, skip: int) -> None:
    view = memoryview(data)[skip:]  # unaligned starts
    want = crc32c.crc32c(view, value)
    assert NATIVE.crc32c(view, value) == want
    assert NATIVE.crc32c_table(view, value) == want
    assert NATIVE.crc32c(view) == crc32c.crc32c(view)


_key_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_key_text, max_size=20))
def test_key_digests_are_hashlibs_blake2b_8(keys: list[str]) -> None:
    joined = NATIVE.key_digests(keys)
    assert joined == b"".join(key_digests_py(keys))
    assert key_hashes(keys) == [int.from_bytes(d, "big") for d in key_digests_py(keys)]
    assert [key_hash(k) for k in keys] == key_hashes(keys)


_lane_lengths = st.sampled_from([0, 1, 7, 8, 31, 32, 36, 63, 64, 100, 120, 127, 128, 129, 200, 256, 257])


@settings(max_examples=300, deadline=None)
@given(shapes=st.lists(st.tuples(_lane_lengths, st.sampled_from("k\u00e9\u20ac")), max_size=14))
def test_key_digests_four_lanes_are_hashlibs(shapes: list[tuple[int, str]]) -> None:
    """With AVX2, keys of at most one block (128 UTF-8 bytes) are hashed four at a time, longer ones
    one by one and a rest of one alone or of two or three in a four-lane pass with spare lanes: any
    mix of lengths and counts gives hashlib's digests in key order, through key_digests and through
    index_add_fresh's pending entries."""
    keys = [char * length for length, char in shapes]
    want = [hashlib.blake2b(k.encode(), digest_size=8).digest() for k in keys]
    assert NATIVE.key_digests(keys) == b"".join(want)
    distinct = list(dict.fromkeys(keys))
    pending = bytearray()
    rows, offsets = [(k,) for k in distinct], list(range(len(distinct)))
    done = NATIVE.index_add_fresh({}, array("q"), array("q"), array("q"), pending, rows, offsets, 5)
    if len({hashlib.blake2b(k.encode(), digest_size=8).digest() for k in distinct}) == len(distinct):
        assert done
        assert [bytes(pending[24 * i : 24 * i + 8]) for i in range(len(distinct))] == [
            hashlib.blake2b(k.encode(), digest_size=8).digest() for k in distinct
        ]


@pytest.mark.parametrize("length", [0, 1, 63, 64, 127, 128, 129, 255, 256, 257, 1000])
def test_key_digests_at_block_boundaries(length: int) -> None:
    """blake2b's last block is the one with the final flag, also when the input fills it exactly."""
    key = "k" * length
    assert (
        NATIVE.key_digests([key, "é" * length])
        == hashlib.blake2b(key.encode(), digest_size=8).digest()
        + hashlib.blake2b(("é" * length).encode(), digest_size=8).digest()
    )


def test_key_digests_refuse_what_str_encode_refuses() -> None:
    with pytest.raises(UnicodeEncodeError):
        NATIVE.key_digests(["ok", "\ud800"])
    with pytest.raises(UnicodeEncodeError):
        "\ud800".encode()
    with pytest.raises(AttributeError):
        NATIVE.key_digests([b"bytes"])


@settings(max_examples=100, deadline=None)
@given(
    entries=st.lists(st.tuples(st.binary(min_size=8, max_size=8), st.integers(-(1 << 63), (1 << 63) - 1))),
    store_ms=st.integers(-(1 << 63), (1 << 63) - 1),
)
def test_pack_entries_packs_the_index_entry_layout(entries: list[tuple[bytes, int]], store_ms: int) -> None:
    digests = b"".join(d for d, _ in entries)
    offsets = [o for _, o in entries]
    want = b"".join(ENTRY.pack(int.from_bytes(d, "big"), o, store_ms) for d, o in entries)
    assert NATIVE.pack_entries(digests, offsets, store_ms) == want
    with pytest.raises(ValueError):
        NATIVE.pack_entries(digests + b"x", offsets, store_ms)


def test_pure_at_run_time_does_without_the_extension(tmp_path: Path) -> None:
    """TXMQ_PURE=1: the extension is not imported and the Python encoder and hashes run."""
    env = {**subprocess_env(tmp_path), "TXMQ_PURE": "1"}
    script = "from txmq.storage import codec, index\nprint(codec.BATCHENC is None)\n"
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]
    env.pop("TXMQ_PURE")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"]
    assert os.path.basename(NATIVE.__file__).startswith("_batchenc.")


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.sampled_from(["", "C0A8000100002A9F", "0A010203000027D3", "é-not-hex"]),
    offsets=st.lists(st.integers(0, (1 << 64) - 1), max_size=20),
)
def test_offset_ids_are_the_prefix_and_sixteen_hex_digits(prefix: str, offsets: list[int]) -> None:
    want = [prefix + _HEX16(o) for o in offsets]
    assert NATIVE.offset_ids(prefix, offsets) == want
    assert offset_ids(prefix, offsets) == want
    assert [prefix + h for h in _hex16s(offsets)] == want  # the Python path without the extension


def test_offset_ids_refuse_what_is_not_an_offset() -> None:
    with pytest.raises(OverflowError):
        NATIVE.offset_ids("P", [-1])
    with pytest.raises(OverflowError):
        NATIVE.offset_ids("P", [1 << 64])
    with pytest.raises(struct.error):
        NATIVE.offset_ids("P", ["1"])
    with pytest.raises(TypeError):
        NATIVE.offset_ids(b"P", [1])


_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_I32 = st.integers(-(1 << 31), (1 << 31) - 1)


@settings(max_examples=300, deadline=None)
@given(
    units=st.lists(st.tuples(_I64, _I32, _I64), min_size=1, max_size=12),
    bad=st.sampled_from([None, None, None, "offset", "size", "code", "type"]),
)
def test_pack_units_packs_what_the_struct_packs(units: list[tuple[int, int, int]], bad: str | None) -> None:
    """``pack_units`` (a run's ConsumeQueue units in one C call) against ``pack_units_py``: the same
    bytes, and a value out of a field's range refused with struct.error as struct refuses it."""
    offsets, sizes, codes = (list(column) for column in zip(*units, strict=True))
    where = len(units) - 1
    if bad == "offset":
        offsets[where] = 1 << 63
    elif bad == "size":
        sizes[where] = 1 << 31
    elif bad == "code":
        codes[where] = -(1 << 63) - 1
    elif bad == "type":
        sizes[where] = "1"  # type: ignore[call-overload]
    if bad is None or where == 0:  # the first unit is put_run's own, never packed here
        want = pack_units_py(offsets, sizes, codes)
        assert NATIVE.pack_units(offsets, sizes, codes, 1) == want
        assert pack_units(offsets, sizes, codes) == want
        if bad is not None:
            return
        assert NATIVE.pack_units(offsets, sizes, codes, 0) == b"".join(
            struct.pack(">qiq", *unit) for unit in zip(offsets, sizes, codes, strict=True)
        )
        return
    with pytest.raises(struct.error):
        pack_units_py(offsets, sizes, codes)
    with pytest.raises(struct.error):
        NATIVE.pack_units(offsets, sizes, codes, 1)


def test_pack_units_refuses_columns_of_different_lengths() -> None:
    with pytest.raises(ValueError):
        NATIVE.pack_units([1, 2], [3], [4, 5], 1)
    with pytest.raises(ValueError):
        NATIVE.pack_units([1, 2], [3, 4], [4, 5], 3)


@settings(max_examples=300, deadline=None)
@given(
    present=st.lists(st.integers(0, 40), max_size=6),
    fresh=st.lists(st.integers(0, 40), min_size=1, max_size=12),
    big=st.booleans(),
)
def test_head_extend_extends_the_head_as_extend_new(present: list[int], fresh: list[int], big: bool) -> None:
    """``ActiveEntries.extend_digests`` (the head extended in C) against ``extend_new``: the same
    answer, and the same head (items in the same order) and arrays after it, when a hash is already
    there, repeats in the batch, or is fresh; hashes with the top bit set read as unsigned."""
    top = (1 << 63) if big else 0
    hashes = [top | (h * 0x9E3779B97F4A7C15 % (1 << 63)) for h in fresh]
    digests = b"".join(h.to_bytes(8, "big") for h in hashes)
    offsets = list(range(1000, 1000 + len(hashes)))
    python, native = ActiveEntries(), ActiveEntries()
    for entries in (python, native):
        for i, h in enumerate(present):
            entries.append(top | (h * 0x9E3779B97F4A7C15 % (1 << 63)), 10 + i, 7)
    fits = len(set(hashes)) == len(hashes) and not set(hashes) & set(python.head)
    want = python.extend_new(hashes, offsets, 9)
    got = native.extend_digests(digests, offsets, 9)
    assert got == want == fits
    assert list(native.head.items()) == list(python.head.items())
    assert (native.offsets, native.stamps, native.previous) == (
        python.offsets,
        python.stamps,
        python.previous,
    )


def test_head_extend_refuses_digests_that_are_not_whole() -> None:
    head: dict[int, int] = {}
    with pytest.raises(ValueError):
        NATIVE.head_extend(head, b"x" * 9, 0)
    with pytest.raises(TypeError):
        NATIVE.head_extend([], b"x" * 8, 0)
    assert head == {}


def _index() -> KeyIndex:
    return KeyIndex(FaultyFileSystem(), "/data/index", lambda topic, properties: [])


def _state(index: KeyIndex) -> tuple[object, ...]:
    active = index.active
    return (list(active.head.items()), active.offsets, active.stamps, active.previous, bytes(index._pending))


_POOL = ["k", "UNIQ-0A0B0C", "%TXOP%4242", "é-key", "x" * 128, "y" * 129, "", "日本"]


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(
        st.tuples(
            st.lists(st.sampled_from(_POOL) | _key_text, max_size=4),
            st.integers(-3, 5000),  # below a key's newest entry sometimes: that key is skipped
            st.integers(-(1 << 63), (1 << 63) - 1),
        ),
        max_size=12,
    )
)
def test_index_add_makes_the_entries_add_keys_py_makes(records: list[tuple[list[str], int, int]]) -> None:
    """``_batchenc.index_add`` (``KeyIndex.add``'s C call) against ``KeyIndex._add_keys_py`` record by
    record: the same head (items in the same order), arrays and packed entries, whether a key is new,
    repeats in its record, was indexed before (the memo of recent keys: equal text in a new str), or
    has an entry at or after the offset. Keys are copied into fresh str objects each time."""
    python, native = _index(), _index()
    for keys, offset, store_ms in records:
        copies = ["".join(list(key)) for key in keys]  # equal text, other objects (the memo's case)
        python._add_keys_py(copies, offset, store_ms)
        active = native.active
        NATIVE.index_add(
            active.head, active.offsets, active.stamps, active.previous, native._pending, tuple(keys),
            offset, store_ms,
        )  # fmt: skip
        assert _state(native) == _state(python)
    for key in {key for keys, _, _ in records for key in keys}:
        assert NATIVE.key_digests([key]) == hashlib.blake2b(key.encode(), digest_size=8).digest()


def test_index_add_memo_evicts_and_still_hashes_right() -> None:
    """More distinct keys than the memo holds, then all of them again (equal text, new objects) and a
    str subclass: every entry is the one hashlib gives."""
    python, native = _index(), _index()
    keys = [f"key-{i}" for i in range(2000)] + ["é" * 200]
    for round_ in range(2):
        for i, key in enumerate(keys):
            offset = round_ * 10_000 + i
            python._add_keys_py([key], offset, 5)
            active = native.active
            NATIVE.index_add(
                active.head, active.offsets, active.stamps, active.previous, native._pending,
                ["".join(list(key))], offset, 5,
            )  # fmt: skip
    assert _state(native) == _state(python)

    class Key(str):
        pass

    entries = bytearray()
    NATIVE.index_add({}, array("q"), array("q"), array("q"), entries, [Key("key-7")], 1, 2)
    assert entries[:8] == hashlib.blake2b(b"key-7", digest_size=8).digest()


def test_index_add_refuses_what_add_keys_py_refuses() -> None:
    """A key that is not a str, or one str.encode refuses: the error the compiled ``_add_keys_py``
    raises (a bytes key: TypeError, its loop variable being a str), after the same entries."""
    for bad in ([b"bytes"], ["\ud800"]):
        python, native = _index(), _index()
        with pytest.raises((TypeError, UnicodeEncodeError)) as want:
            python._add_keys_py(["ok", *bad], 7, 1)  # type: ignore[list-item]
        active = native.active
        with pytest.raises((TypeError, UnicodeEncodeError)) as got:
            NATIVE.index_add(
                active.head, active.offsets, active.stamps, active.previous, native._pending, ["ok", *bad],
                7, 1,
            )  # fmt: skip
        assert type(got.value) is type(want.value)
        assert str(got.value) == str(want.value)
        assert _state(native) == _state(python)
    with pytest.raises(TypeError):
        NATIVE.index_add({}, array("q"), array("q"), array("q"), b"", ["k"], 1, 2)  # pending not a bytearray
    with pytest.raises(TypeError):
        NATIVE.index_add([], array("q"), array("q"), array("q"), bytearray(), ["k"], 1, 2)


def test_key_index_add_takes_the_c_call() -> None:
    """``KeyIndex.add`` with the extension: the entries of ``_add_keys_py``, replays skipped."""
    python, native = _index(), _index()
    for offset, keys in ((10, ("a", "b")), (20, ("a",)), (20, ("c",)), (15, ("d",)), (30, ("a", "a"))):
        native.add("T", b"", offset, 99, keys)
        if offset > python._last_offset:
            python._last_offset = offset
            python._add_keys_py(keys, offset, 99)
    assert _state(native) == _state(python)
