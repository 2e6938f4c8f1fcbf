"""Regression: a power cut tore an unsynced ConsumeQueue file that was followed by a newer file.

Recovery trimmed only the last file's partial unit; once the (empty) last file was dropped, the torn
earlier file kept a partial unit, later units were appended misaligned and reads served other
queues' records. Found by the stateful store model (tests/property/test_storage_stateful.py).
"""

from __future__ import annotations

import random

from txmq.common.clock import FakeClock
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

CONFIG = StoreConfig(data_dir="/data", segment_bytes=4096, consume_queue_units_per_file=4)


def test_torn_consume_queue_files_are_rebuilt_aligned() -> None:
    fs = FaultyFileSystem(random.Random(1))
    clock = FakeClock()
    store = MessageStore.open(CONFIG, fs=fs, clock=clock)
    store.put_batch_nowait([PutRequest("A", 0, b"a0"), PutRequest("A", 0, b"a1")])
    store.flush()
    store.checkpoint()
    store = MessageStore.open(CONFIG, fs=fs, clock=clock)
    store.put_batch_nowait([PutRequest("B", 0, b"b%d" % i) for i in range(5)])
    store.flush()  # the log is durable; the queue files of B are not (no checkpoint since)
    for path, file in fs.files.items():
        if "/consumequeue/B/" in path:  # tear both of B's queue files mid-unit
            keep = 7 if path.endswith("0" * 20) else 16
            file.data = bytearray(file.data[:keep])
            file.durable = bytes(file.data)
    store = MessageStore.open(CONFIG, fs=fs, clock=clock)
    read = store.read_queue("B", 0, 0, 100)
    assert [(r.topic, r.queue_offset, r.body) for r in read.records] == [
        ("B", i, b"b%d" % i) for i in range(5)
    ]
