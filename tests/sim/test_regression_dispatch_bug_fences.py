"""A dispatch that fails with anything but an OSError (a bug, not the disk) used to leave the store
writable although the records it had taken from the dispatch queue were in no ConsumeQueue and queued
nowhere any more: consumers would never see them until a restart, and later sends went on being
acknowledged behind that hole. The store now fences itself (read-only until restarted), the error
surfaces, reads keep working, and a restart rebuilds every record from the log."""

from __future__ import annotations

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import StoreFenced
from txmq.storage.api import PutRequest, ReadStatus, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore


class _BuggyWrites(FaultyFileSystem):
    """Raises a RuntimeError (a stand-in for a bug in the write path) on the next write under a prefix."""

    def __init__(self) -> None:
        super().__init__()
        self.bug_prefix: str | None = None

    def before_write(self, size: int, path: str = "") -> None:
        if self.bug_prefix is not None and path.startswith(self.bug_prefix):
            self.bug_prefix = None
            raise RuntimeError("injected bug in a ConsumeQueue write")
        super().before_write(size, path)


async def test_a_dispatch_bug_fences_the_store_and_a_restart_rebuilds() -> None:
    fs = _BuggyWrites()
    config = StoreConfig(data_dir="/s", segment_bytes=64 * 1024)
    store = MessageStore.open(config, fs=fs, clock=FakeClock())
    store.inline_flush = True
    await store.put_batch([PutRequest("A", 0, b"a0"), PutRequest("B", 0, b"b0")])
    store.inline_flush = False  # the next batch is appended, then flushed by hand
    store.put_batch_nowait([PutRequest("A", 0, b"a1"), PutRequest("B", 0, b"b1")])
    fs.bug_prefix = "/s/consumequeue"
    with pytest.raises(RuntimeError, match="injected bug"):
        store.flush()
    store.inline_flush = True
    with pytest.raises(StoreFenced, match="dispatching appended records failed"):
        await store.put_batch([PutRequest("A", 0, b"a2")])
    for topic in ("A", "B"):
        read = store.read_queue(topic, 0, 0, 10)
        assert read.status is ReadStatus.FOUND
        assert [r.body for r in read.records][:1] == [topic.lower().encode() + b"0"]
    await store.close()
    reopened = MessageStore.open(config, fs=fs, clock=FakeClock())
    for topic in ("A", "B"):
        bodies = [r.body for r in reopened.read_queue(topic, 0, 0, 10).records]
        assert bodies == [topic.lower().encode() + b"0", topic.lower().encode() + b"1"]
    await reopened.close()
