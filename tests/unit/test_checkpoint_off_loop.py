"""The periodic checkpoint on the real disk: its fsyncs (ConsumeQueue and index files, the checkpoint
file) run on a worker thread, not the loop's, and what it records was taken on the loop before they
started, so it never claims more than is durable; a failed sync fences the store; close waits for a
checkpoint still being written."""

from __future__ import annotations

import asyncio
import posixpath
import threading
from pathlib import Path

import pytest

from txmq.common import properties as props
from txmq.common.errors import StoreFenced
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.checkpoint import CHECKPOINT_FILE, Checkpoint, load_checkpoint
from txmq.storage.fs import OsFileSystem
from txmq.storage.store import MessageStore


class GatedDisk(OsFileSystem):
    """The real disk; records the thread of every ``sync_path`` and can hold them at a gate."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail = False
        self.saved: list[Checkpoint] = []  # every checkpoint as it was renamed into place

    def rename(self, source: str, target: str) -> None:
        super().rename(source, target)
        if posixpath.basename(target) == CHECKPOINT_FILE:
            saved = load_checkpoint(self, posixpath.dirname(target))
            assert saved is not None
            self.saved.append(saved)

    def sync_path(self, path: str) -> None:
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        self.gate.wait(10)
        if self.fail:
            raise OSError(5, "injected fdatasync error", path)
        super().sync_path(path)


def _config(tmp_path: Path) -> StoreConfig:
    return StoreConfig(data_dir=str(tmp_path / "store"), segment_bytes=1 << 20, checkpoint_interval_ms=20)


async def _until(condition: object, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_the_checkpoint_syncs_off_the_loop_and_records_only_what_was_dispatched_before(
    tmp_path: Path,
) -> None:
    fs = GatedDisk()
    store = MessageStore.open(_config(tmp_path), fs=fs)
    await store.start()
    try:
        for i in range(5):
            await store.put(PutRequest("T", 0, b"m%d" % i, props.encode({"KEYS": f"k{i}"})))
        await _until(lambda: fs.saved and fs.saved[-1].dispatched_offset == store.dispatched_offset)
        await _until(lambda: store._checkpointing is None)
        fs.gate.clear()
        fs.entered.clear()
        await store.put(PutRequest("T", 0, b"m5"))
        before = store.dispatched_offset
        await _until(fs.entered.is_set)  # the next checkpoint's syncs started, held at the gate
        # the loop keeps serving meanwhile: more appends are acknowledged and dispatched
        for i in range(6, 10):
            await store.put(PutRequest("T", 0, b"m%d" % i))
        assert store.dispatched_offset > before
        count = len(fs.saved)
        fs.gate.set()
        await _until(lambda: len(fs.saved) > count)
        held = fs.saved[count]
        assert held.dispatched_offset == before  # taken before the syncs, not what came during them
        assert held.queue_ends == (("T", 0, 6),)
        assert fs.threads and threading.main_thread().name not in fs.threads
        assert all(name.startswith("asyncio") for name in fs.threads), fs.threads
    finally:
        await store.close()
    reopened = MessageStore.open(_config(tmp_path), fs=OsFileSystem())
    try:
        read = reopened.read_queue("T", 0, 0, 32)
        assert [r.body for r in read.records] == [b"m%d" % i for i in range(10)]
    finally:
        await reopened.close()


async def test_a_failed_checkpoint_sync_fences_the_store(tmp_path: Path) -> None:
    fs = GatedDisk()
    store = MessageStore.open(_config(tmp_path), fs=fs)
    await store.start()
    try:
        fs.fail = True
        await store.put(PutRequest("T", 0, b"a"))  # acknowledged: the log's fsync is not the checkpoint's
        await _until(lambda: store.fenced)
        with pytest.raises(StoreFenced):
            await store.put(PutRequest("T", 0, b"b"))
    finally:
        await store.close()


async def test_close_waits_for_a_checkpoint_being_written(tmp_path: Path) -> None:
    fs = GatedDisk()
    store = MessageStore.open(_config(tmp_path), fs=fs)
    await store.start()
    fs.gate.clear()
    await store.put(PutRequest("T", 0, b"a"))
    await _until(fs.entered.is_set)
    closing = asyncio.ensure_future(store.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # held by the checkpoint's sync on the worker thread
    fs.gate.set()
    await closing
    saved = load_checkpoint(fs, store.config.data_dir)
    assert saved is not None and saved.dispatched_offset == store.dispatched_offset
