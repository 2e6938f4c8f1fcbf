"""Fuzz: the CommitLog record decoder and the metadata files. Random and mutated bytes must decode or
raise CorruptRecord; damaged metadata must give a clear error, never a crash of another kind."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txmq.broker.persist import MetaFiles
from txmq.common.errors import CorruptRecord, TxmqError
from txmq.storage import codec
from txmq.storage.checkpoint import load_checkpoint, load_layout, write_meta
from txmq.storage.fs import FaultyFileSystem

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GOOD = codec.encode(
    codec.RecordFields(
        b"topic", 3, b"body" * 10, b"KEYS\x01k1\x02", 7, 0, 0, 1_700_000_000_000, b"10.0.0.1:1", 0, 0
    ),
    store_host=b"10.0.0.2:10911",
    queue_offset=5,
    physical_offset=1_000,
    store_timestamp_ms=1_700_000_000_001,
)


def _decode_or_corrupt(data: bytes, pos: int = 0) -> None:
    try:
        codec.decode(data, pos, offset=1_000 + pos)
    except CorruptRecord:
        pass


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_decode_or_raise_corrupt_record(data: bytes) -> None:
    _decode_or_corrupt(data)


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(0, 255)), min_size=1, max_size=8),
    st.integers(0, len(GOOD)),
)
def test_mutated_records_decode_or_raise_corrupt_record(edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(GOOD)
    for index, value in edits:
        data[index] = value
    _decode_or_corrupt(bytes(data[:cut]) if cut else bytes(data))


@FUZZ
@given(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=64))
def test_absurd_sizes_raise_corrupt_record(size: int, tail: bytes) -> None:
    _decode_or_corrupt(struct.pack(">i", size) + GOOD[4:8] + tail)


def _meta_errors(fs: FaultyFileSystem, path: str, raw: bytes) -> None:
    handle = fs.open(path)
    handle.truncate(0)
    handle.append(raw)
    for load in (lambda: load_checkpoint(fs, "/d"), lambda: load_layout(fs, "/d")):
        try:
            load()
        except CorruptRecord:
            pass


@FUZZ
@given(st.binary(max_size=64), st.sampled_from(["checkpoint", "layout"]))
def test_corrupt_store_metadata_is_a_clear_error(raw: bytes, name: str) -> None:
    fs = FaultyFileSystem()
    fs.makedirs("/d")
    _meta_errors(fs, f"/d/{name}", raw)


@FUZZ
@given(st.binary(max_size=64))
def test_well_framed_but_wrong_store_metadata_is_a_clear_error(payload: bytes) -> None:
    fs = FaultyFileSystem()
    fs.makedirs("/d")
    for name, load in (("checkpoint", load_checkpoint), ("layout", load_layout)):
        write_meta(fs, f"/d/{name}", payload)
        try:
            load(fs, "/d")
        except CorruptRecord:
            pass


@FUZZ
@given(st.one_of(st.binary(max_size=80), st.text(max_size=80).map(str.encode)))
def test_broker_metadata_json_is_a_clear_error(payload: bytes) -> None:
    fs = FaultyFileSystem()
    meta = MetaFiles(fs, Path("/c"))
    write_meta(fs, "/c/topics.json", payload)
    try:
        meta.load_json("topics.json")
    except TxmqError:
        pass


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["topics.json", "consumer_offsets.json", "delay_cursors.json", "transactions.json"]), JSON
)
async def test_broker_open_with_wrong_metadata_is_a_clear_error(name: str, value: object) -> None:
    """A metadata file holding valid JSON of the wrong shape: the broker opens or says which file."""
    import json

    from txmq.broker.broker import Broker
    from txmq.broker.config import BrokerConfig
    from txmq.common.clock import FakeClock

    fs = FaultyFileSystem()
    fs.makedirs("/b/config")
    write_meta(fs, f"/b/config/{name}", json.dumps(value).encode())
    try:
        broker = await Broker.open(BrokerConfig(data_dir="/b"), clock=FakeClock(), fs=fs, inline_flush=True)
    except TxmqError as exc:
        message = exc.message
    else:
        await broker.close()
        return
    assert name in message or "metadata" in message
