"""A damaged record early in the CommitLog (before the checkpoint, so recovery does not scan it): the
read that reaches it fails naming the record's offset and ``txmq store repair``; the log says it once."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from txmq.common.errors import CorruptRecord
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.store import MessageStore

SEGMENT = 4096


def _damaged_store(data_dir: Path) -> tuple[MessageStore, int]:
    store = MessageStore.open(StoreConfig(data_dir=str(data_dir), segment_bytes=SEGMENT))
    offsets = []
    for i in range(30):
        result, _ = store.put_nowait(PutRequest("T", 0, b"%04d" % i + b"z" * 300))
        offsets.append(result.physical_offset)
    store.flush()
    store.checkpoint()
    asyncio.run(store.close())
    bad = offsets[5]
    path = data_dir / "commitlog" / f"{bad - bad % SEGMENT:020d}"
    raw = bytearray(path.read_bytes())
    raw[bad % SEGMENT + 200] ^= 0x10  # in the body: the CRC no longer checks out
    path.write_bytes(bytes(raw))
    return MessageStore.open(StoreConfig(data_dir=str(data_dir), segment_bytes=SEGMENT)), bad


def test_a_damaged_record_read_names_its_offset_and_the_repair_command(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, bad = _damaged_store(tmp_path)
    try:
        assert len(store.read_queue("T", 0, 0, 5).records) == 5  # the records before it are served
        caplog.set_level(logging.ERROR, logger="txmq.storage.commitlog")
        for read in (lambda: store.read_queue("T", 0, 0, 32), lambda: store.read_queue_raw("T", 0, 5, 1)):
            with pytest.raises(CorruptRecord) as caught:
                read()
            message = caught.value.message
            assert f"log offset {bad}" in message
            assert f"txmq store repair --data-dir {tmp_path}" in message
            assert caught.value.offset == bad
        assert [r.getMessage() for r in caplog.records].count(message) == 1  # once, not per read
    finally:
        asyncio.run(store.close())
