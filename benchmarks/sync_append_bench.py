"""SYNC-mode appends with few appenders (one record in flight each): msg/s, per-append latency
percentiles and CPU per message, from the tree on ``PYTHONPATH`` (so the same script A/B-tests two
trees: ``PYTHONPATH=/other/tree/src python benchmarks/sync_append_bench.py``).

What it shows: the cost of the fdatasync behind each acknowledged append, which journals a
file-size change when the CommitLog file grows by appends, and does not when the append writes over
preallocated zeros (``StoreConfig.prealloc_bytes``).

    python benchmarks/sync_append_bench.py --seconds 3 --appenders 1 [--prealloc 0]
    python benchmarks/sync_append_bench.py --seconds 10 --paired

``--paired``: two stores in one process, one growing (``prealloc_bytes=0``) and one preallocated,
one appender taking turns between them put by put, so a loaded disk's drift hits both alike.
``--raw``: the same on bare files, no store: ``--body`` bytes written then fdatasync, taking turns
between a file growing by appends and one written over zeros fsynced beforehand.

Without ``--paired``/``--raw`` it also prints the disk's written KiB per append (``/proc/diskstats``
of the device holding ``--dir``: the journal blocks an fdatasync commits count there; other
processes writing to the same device add noise, so compare runs back to back).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import tempfile
import time

from txmq import native
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.store import MessageStore


async def _run(directory: str, seconds: float, appenders: int, body_bytes: int, prealloc: int | None) -> None:
    config = StoreConfig(data_dir=directory, flush_mode=FlushMode.SYNC, segment_bytes=256 * 1024 * 1024)
    if prealloc is not None:
        config = dataclasses.replace(config, prealloc_bytes=prealloc)  # (a tree without it: TypeError)
    store = MessageStore.open(config)
    await store.start()
    body = b"x" * body_bytes
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def appender(queue_id: int) -> None:
        request = PutRequest("BENCH", queue_id, body)
        timer = time.perf_counter
        while timer() < deadline:
            started = timer()
            await store.put(request)
            latencies.append(timer() - started)

    started = time.perf_counter()
    cpu = time.process_time()
    sectors = _sectors_written(directory)
    await asyncio.gather(*(appender(i % 8) for i in range(appenders)))
    elapsed = time.perf_counter() - started
    disk_kib = (_sectors_written(directory) - sectors) / 2 / max(len(latencies), 1)
    cpu_us = (time.process_time() - cpu) / max(len(latencies), 1) * 1e6
    await store.close()
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(len(latencies) * p))] * 1e6

    print(
        f"appenders {appenders}: {len(latencies) / elapsed:8.0f} msg/s  p50 {pct(0.5):6.0f} us  "
        f"p99 {pct(0.99):6.0f} us  p99.9 {pct(0.999):6.0f} us  cpu {cpu_us:5.0f} us/msg  "
        f"disk {disk_kib:5.1f} KiB/msg",
        flush=True,
    )


def _sectors_written(path: str) -> int:
    """Sectors (512 B) written so far to the block device holding ``path`` (-1: unknown)."""
    device = os.stat(path).st_dev
    wanted = f"{os.major(device)} {os.minor(device)} "
    try:
        with open("/proc/diskstats") as stats:
            for line in stats:
                if " ".join(line.split()[:2]) + " " == wanted:
                    return int(line.split()[9])
    except OSError:
        pass
    return -1


async def _paired(root: str, seconds: float, body_bytes: int) -> None:
    stores = {}
    for name, prealloc in (("growing", 0), ("preallocated", 1024 * 1024)):
        config = StoreConfig(data_dir=f"{root}/{name}", flush_mode=FlushMode.SYNC,
                             segment_bytes=256 * 1024 * 1024, prealloc_bytes=prealloc)  # fmt: skip
        stores[name] = MessageStore.open(config)
        await stores[name].start()
    latencies: dict[str, list[float]] = {name: [] for name in stores}
    request = PutRequest("BENCH", 0, b"x" * body_bytes)
    timer = time.perf_counter
    deadline = timer() + seconds
    while timer() < deadline:
        for name, store in stores.items():
            started = timer()
            await store.put(request)
            latencies[name].append(timer() - started)
    for store in stores.values():
        await store.close()
    _print(latencies)


def _raw(root: str, seconds: float, body_bytes: int) -> None:
    chunk = b"y" * body_bytes
    growing = os.open(f"{root}/growing", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    prepared = os.open(f"{root}/prepared", os.O_WRONLY | os.O_CREAT, 0o644)
    zeros = bytes(1 << 20)
    for step in range(64):
        os.pwrite(prepared, zeros, step << 20)
    os.fdatasync(prepared)
    latencies: dict[str, list[float]] = {"growing": [], "preallocated": []}
    position = 0
    timer = time.perf_counter
    deadline = timer() + seconds
    while timer() < deadline and position + body_bytes <= 64 << 20:
        started = timer()
        os.write(growing, chunk)
        os.fdatasync(growing)
        latencies["growing"].append(timer() - started)
        started = timer()
        os.pwrite(prepared, chunk, position)
        os.fdatasync(prepared)
        latencies["preallocated"].append(timer() - started)
        position += body_bytes
    os.close(growing)
    os.close(prepared)
    _print(latencies)


def _print(latencies: dict[str, list[float]]) -> None:
    for name, unsorted in latencies.items():
        values = sorted(unsorted)

        def pct(p: float, values: list[float] = values) -> float:
            return values[min(len(values) - 1, int(len(values) * p))] * 1e6

        mean = sum(values) / len(values) * 1e6
        print(f"{name:13s}: {len(values)} writes  mean {mean:6.0f} us  p50 {pct(0.5):6.0f} us  "
              f"p90 {pct(0.9):6.0f} us  p99 {pct(0.99):6.0f} us", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--appenders", default="1", help="comma-separated, e.g. 1,4")
    parser.add_argument("--body", type=int, default=300, help="body bytes")
    parser.add_argument("--prealloc", type=int, default=None, help="prealloc_bytes (default: the store's)")
    parser.add_argument("--dir", default=None, help="directory on the disk to test (default: a temp dir)")
    parser.add_argument("--paired", action="store_true", help="growing vs preallocated, put by put")
    parser.add_argument("--raw", action="store_true", help="the same on bare files (no store)")
    args = parser.parse_args()
    print(native.summary(), flush=True)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.raw:
        with tempfile.TemporaryDirectory(dir=args.dir) as root:
            _raw(root, args.seconds, args.body)
        return
    if args.paired:
        with tempfile.TemporaryDirectory(dir=args.dir) as root:
            asyncio.run(_paired(root, args.seconds, args.body))
        return
    for appenders in (int(n) for n in args.appenders.split(",")):
        with tempfile.TemporaryDirectory(dir=args.dir) as root:
            asyncio.run(_run(root, args.seconds, appenders, args.body, args.prealloc))


if __name__ == "__main__":
    main()
