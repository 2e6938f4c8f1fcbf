"""Found by the simulation: when writing one ConsumeQueue failed during dispatch, the units buffered
for the other queues of that round stayed buffered, and every later read of those queues raised
InvariantViolation (not a TxmqError) until restart. They are now discarded (the fenced store rebuilds
them from the log on restart) and reads keep working."""

from __future__ import annotations

import errno

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import StoreFenced
from txmq.storage.api import PutRequest, ReadStatus, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore


async def test_reads_work_after_a_failed_dispatch_and_restart_rebuilds() -> None:
    fs = FaultyFileSystem()
    config = StoreConfig(data_dir="/s", segment_bytes=64 * 1024)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    store.inline_flush = True
    await store.put_batch([PutRequest("A", 0, b"a0"), PutRequest("B", 0, b"b0")])
    store.inline_flush = False  # the next batch is appended, then flushed by hand
    store.put_batch_nowait([PutRequest("A", 0, b"a1"), PutRequest("B", 0, b"b1")])
    # the first ConsumeQueue write of the next dispatch fails (the CommitLog's group write before it
    # succeeds: appends are buffered and written once per group)
    fs.fail_next_write(errno.EIO, path_prefix="/s/consumequeue")
    with pytest.raises(StoreFenced):
        store.flush()
    for topic in ("A", "B"):
        read = store.read_queue(topic, 0, 0, 10)
        assert read.status is ReadStatus.FOUND
        assert [r.body for r in read.records][:1] == [topic.lower().encode() + b"0"]
    await store.close()
    reopened = MessageStore.open(config, fs=fs, clock=FakeClock())
    assert [r.body for r in reopened.read_queue("B", 0, 0, 10).records] == [b"b0", b"b1"]
    await reopened.close()
