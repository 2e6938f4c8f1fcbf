"""Append throughput of 1 KB records: SYNC (group commit, many concurrent appenders), ASYNC, and the
machine's raw write+fdatasync group-commit rate at the same batch size, measured in the same run.

    python benchmarks/storage_bench.py --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from txmq import native
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.store import MessageStore

RECORD_BYTES = 1024


async def _store_run(
    directory: str, mode: FlushMode, seconds: float, appenders: int
) -> tuple[float, float, float]:
    """Returns (messages per second, messages per fsync, CPU microseconds per message)."""
    store = MessageStore.open(
        StoreConfig(data_dir=directory, flush_mode=mode, segment_bytes=256 * 1024 * 1024)
    )
    await store.start()
    body = b"x" * (RECORD_BYTES - 120)  # ~1 KB on disk with header, topic and hosts
    count = 0
    deadline = time.perf_counter() + seconds

    async def appender(queue_id: int) -> None:
        nonlocal count
        request = PutRequest("BENCH", queue_id, body)
        while time.perf_counter() < deadline:
            await store.put(request)
            count += 1

    started = time.perf_counter()
    cpu = time.process_time()
    flushes_before = store.flush_count
    await asyncio.gather(*(appender(i % 8) for i in range(appenders)))
    elapsed = time.perf_counter() - started
    cpu_us = (time.process_time() - cpu) / max(count, 1) * 1e6
    flushes = max(store.flush_count - flushes_before, 1)
    await store.close()
    return count / elapsed, count / flushes, cpu_us


async def _pipelined_run(directory: str, seconds: float, window: int) -> float:
    """SYNC mode driven the way a broker connection pipelines: put_nowait ``window`` records, then
    await the durability of the last one (which covers the others)."""
    store = MessageStore.open(
        StoreConfig(data_dir=directory, flush_mode=FlushMode.SYNC, segment_bytes=256 * 1024 * 1024)
    )
    await store.start()
    request = PutRequest("BENCH", 0, b"x" * (RECORD_BYTES - 120))
    count = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        durable = None
        for _ in range(window):
            _, durable = store.put_nowait(request)
        assert durable is not None
        await durable
        count += window
    elapsed = time.perf_counter() - started
    await store.close()
    return count / elapsed


def _raw_run(directory: str, seconds: float, batch: int) -> float:
    """A thread writing ``batch`` 1 KB chunks then fdatasync, in a loop (the ceiling for SYNC mode)."""
    path = os.path.join(directory, "raw.bin")
    chunk = b"y" * RECORD_BYTES
    result: list[float] = []

    def run() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            for _ in range(batch):
                os.write(fd, chunk)
            os.fdatasync(fd)
            count += batch
        result.append(count / (time.perf_counter() - started))
        os.close(fd)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return result[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement")
    parser.add_argument("--appenders", type=int, default=256, help="concurrent appending coroutines")
    parser.add_argument("--dir", default=None, help="directory on the disk to test (default: a temp dir)")
    args = parser.parse_args()
    print(native.summary(), flush=True)
    try:  # the broker runs its store on uvloop
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        sync_rate, batch, sync_cpu = asyncio.run(
            _store_run(f"{root}/sync", FlushMode.SYNC, args.seconds, args.appenders)
        )
        async_rate, _, async_cpu = asyncio.run(
            _store_run(f"{root}/async", FlushMode.ASYNC, args.seconds, args.appenders)
        )
        pipelined_rate = asyncio.run(_pipelined_run(f"{root}/pipelined", args.seconds, args.appenders))
        raw_rate = _raw_run(root, args.seconds, max(1, round(batch)))
    print(f"record size        : {RECORD_BYTES} B, appenders: {args.appenders}, {args.seconds:g} s each")
    print(
        f"sync  (group commit): {sync_rate:12,.0f} msg/s  (avg {batch:.1f} msgs per fdatasync,"
        f" {sync_cpu:.1f} us CPU/msg)"
    )
    print(f"sync pipelined     : {pipelined_rate:12,.0f} msg/s  (put_nowait x {args.appenders}, await last)")
    print(f"async              : {async_rate:12,.0f} msg/s  ({async_cpu:.1f} us CPU/msg)")
    print(f"raw write+fdatasync: {raw_rate:12,.0f} msg/s  (batches of {max(1, round(batch))} x 1 KB)")
    print(f"ratio sync/raw     : {sync_rate / raw_rate:.2f}  (goal >= 0.6)")
    print(f"ratio pipelined/raw: {pipelined_rate / raw_rate:.2f}")


if __name__ == "__main__":
    main()
