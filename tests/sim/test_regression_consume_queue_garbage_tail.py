"""Found by the simulation: after a power cut, ConsumeQueue bytes written after the last checkpoint
(never fsynced) can hold anything, e.g. zeros. Recovery's binary search assumed increasing log
offsets, kept garbage units, and the store then refused to open ("ConsumeQueue out of step with the
log"). Recovery now walks back from the end, keeping only units that match their log record."""

from __future__ import annotations

import pytest

from txmq.common.clock import FakeClock
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

CQ = "/s/consumequeue/T/0/00000000000000000000"


@pytest.mark.parametrize("garbage", [b"\x00" * 40, b"\x00" * 20 + b"\x7f" * 20, b"\xff" * 20])
async def test_garbage_in_the_unsynced_consume_queue_tail_is_cut(garbage: bytes) -> None:
    fs = FaultyFileSystem()
    config = StoreConfig(data_dir="/s", segment_bytes=64 * 1024)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    store.inline_flush = True
    for i in range(3):
        await store.put(PutRequest("T", 0, b"before-%d" % i))
    store.checkpoint()
    for i in range(3):
        await store.put(PutRequest("T", 0, b"after-%d" % i))
    cq = fs.files[CQ]
    synced = len(cq.durable)
    cq.data[synced:] = garbage  # the unsynced tail is garbage, then the power goes
    cq.durable = bytes(cq.data)
    reopened = MessageStore.open(config, fs=fs, clock=FakeClock())
    bodies = [r.body for r in reopened.read_queue("T", 0, 0, 100).records]
    assert bodies == [b"before-0", b"before-1", b"before-2", b"after-0", b"after-1", b"after-2"]
    await reopened.close()
