"""FaultyFileSystem semantics the crash tests rely on."""

from __future__ import annotations

import errno
import random

import pytest

from txmq.storage.fs import FaultyFileSystem


def _fs() -> FaultyFileSystem:
    fs = FaultyFileSystem(random.Random(7))
    fs.makedirs("/d")
    return fs


def test_power_cut_keeps_only_synced_bytes() -> None:
    fs = _fs()
    handle = fs.open("/d/f")
    handle.append(b"abc")
    handle.sync()
    handle.append(b"def")
    assert handle.read_at(0, 10) == b"abcdef"
    fs.lose_unfsynced()
    assert fs.read_file("/d/f") == b"abc"


def test_tear_last_write_and_flip_bit() -> None:
    fs = _fs()
    handle = fs.open("/d/f")
    handle.append(b"0123")
    handle.sync()
    handle.append(b"456789")
    fs.tear_last_write("/d/f", 2)
    assert fs.read_file("/d/f") == b"012345"
    fs.flip_bit("/d/f", 0, 0)
    assert fs.read_file("/d/f")[:1] == b"1"
    fs.lose_unfsynced()
    assert fs.read_file("/d/f") == b"1123", "bit rot reaches the durable image too"


def test_enospc_writes_a_prefix_then_fails() -> None:
    fs = _fs()
    handle = fs.open("/d/f")
    fs.set_space_left(3)
    with pytest.raises(OSError) as info:
        handle.append(b"abcdef")
    assert info.value.errno == errno.ENOSPC
    assert fs.read_file("/d/f") == b"abc"
    handle.truncate(0)
    assert fs.space_left == 3, "truncating gives the space back"


def test_injected_eio_on_write_and_sync() -> None:
    fs = _fs()
    handle = fs.open("/d/f")
    fs.fail_next_write()
    with pytest.raises(OSError, match="injected write error"):
        handle.append(b"x")
    assert fs.read_file("/d/f") == b""
    handle.append(b"y")
    fs.fail_next_sync()
    with pytest.raises(OSError, match="injected fsync error"):
        handle.sync()
    fs.lose_unfsynced()
    assert fs.read_file("/d/f") == b"", "a failed fsync made nothing durable"


def test_crash_keeps_a_seeded_prefix_of_unsynced_tails() -> None:
    results = []
    for _ in range(2):
        fs = _fs()
        handle = fs.open("/d/f")
        handle.append(b"k" * 10)
        handle.sync()
        handle.append(b"u" * 100)
        fs.crash()
        results.append(fs.read_file("/d/f"))
    assert results[0] == results[1], "deterministic for a seed"
    assert results[0].startswith(b"k" * 10)
    assert 10 <= len(results[0]) <= 110


def test_directories_and_renames() -> None:
    fs = _fs()
    fs.makedirs("/d/a/b")
    fs.open("/d/a/b/x").append(b"1")
    assert fs.list_dir("/d") == ["a"]
    fs.rename("/d/a/b/x", "/d/a/y")
    assert fs.list_dir("/d/a") == ["b", "y"]
    with pytest.raises(FileNotFoundError):
        fs.open("/missing/z")
