"""System calls a group commit need not make: the free-space check before a write over prepared space
reads the file system once per ``limits.disk_free_ample_ms`` while it shows ample room (it was a statfs
per group), and an append on the loop the store started on finds that loop without
``asyncio.get_running_loop`` (a getpid per call on Python 3.11)."""

from __future__ import annotations

import asyncio
import os
import types
from typing import Any

import pytest

from txmq.common import limits
from txmq.common.clock import FakeClock
from txmq.storage import fs as fs_module
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem, OsFileSystem
from txmq.storage.store import MessageStore


class _Statvfs:
    def __init__(self, free: int) -> None:
        self.free = free
        self.calls = 0

    def __call__(self, path: str) -> Any:
        self.calls += 1
        return types.SimpleNamespace(f_bavail=self.free, f_frsize=1)


def _clock(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    now = [10**12]
    monkeypatch.setattr(fs_module, "time", types.SimpleNamespace(monotonic_ns=lambda: now[0]))
    return now


def test_ample_free_space_is_read_once_per_interval(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    statvfs = _Statvfs(4 * limits.disk_free_ample_bytes)
    monkeypatch.setattr(os, "statvfs", statvfs)
    now = _clock(monkeypatch)
    disk = OsFileSystem()
    assert [disk.free_bytes(str(tmp_path)) for _ in range(50)] == [statvfs.free] * 50
    assert statvfs.calls == 1
    now[0] += limits.disk_free_ample_ms * 1_000_000  # the reading has aged out: read again
    statvfs.free = 3 * limits.disk_free_ample_bytes
    assert disk.free_bytes(str(tmp_path)) == statvfs.free
    assert statvfs.calls == 2


def test_scarce_free_space_is_read_every_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    statvfs = _Statvfs(2 * limits.disk_free_ample_bytes)
    monkeypatch.setattr(os, "statvfs", statvfs)
    _clock(monkeypatch)
    disk = OsFileSystem()
    disk.free_bytes(str(tmp_path))
    statvfs.free = limits.disk_free_ample_bytes - 1  # read at the next interval: from then on every call
    disk._ample.clear()
    assert [disk.free_bytes(str(tmp_path)) for _ in range(5)] == [statvfs.free] * 5
    assert statvfs.calls == 6


@pytest.mark.parametrize("mode", [FlushMode.SYNC, FlushMode.ASYNC])
async def test_an_append_on_the_stores_loop_does_not_look_the_loop_up(
    monkeypatch: pytest.MonkeyPatch, mode: FlushMode
) -> None:
    config = StoreConfig(
        data_dir="/d", segment_bytes=1 << 20, checkpoint_interval_ms=3_600_000, flush_mode=mode
    )
    store = MessageStore.open(config, fs=FaultyFileSystem(), clock=FakeClock())
    await store.start()
    try:
        await store.put(PutRequest("T", 0, b"first"))
        real = asyncio.get_running_loop
        lookups = []

        def counting() -> asyncio.AbstractEventLoop:
            lookups.append(1)
            return real()

        monkeypatch.setattr(asyncio, "get_running_loop", counting)
        _, durable = store.put_nowait(PutRequest("T", 0, b"second"))
        monkeypatch.setattr(asyncio, "get_running_loop", real)
        await durable
        assert lookups == []
        assert store.read_queue("T", 0, 0, 8).records[-1].body == b"second"
    finally:
        await store.close()
