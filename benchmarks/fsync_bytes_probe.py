"""Bytes the disk writes per fdatasync of a 400-byte write: a file growing by appends (the size change
is journaled: data block plus journal blocks) vs a file written over zeros fsynced beforehand (the
data block only). Counts the sectors written to ``vda`` in ``/proc/diskstats`` (other writers on
the device add noise: look at the typical row). Also prints wall time per operation.

    python benchmarks/fsync_bytes_probe.py [directory on the device]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

REC = b"x" * 400
N = 800


def sectors(device: str) -> int:
    with open("/proc/diskstats") as stats:
        for line in stats:
            fields = line.split()
            if fields[2] == device:
                return int(fields[9])
    raise SystemExit(f"no device {device} in /proc/diskstats")


def grow(directory: str, device: str) -> tuple[float, float]:
    path = f"{directory}/growing"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    os.fdatasync(fd)
    before, started = sectors(device), time.perf_counter()
    for _ in range(N):
        os.write(fd, REC)
        os.fdatasync(fd)
    result = ((sectors(device) - before) / 2 / N, (time.perf_counter() - started) / N * 1e6)
    os.close(fd)
    os.remove(path)
    return result


def prepared(directory: str, device: str) -> tuple[float, float]:
    path = f"{directory}/prepared"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, bytes(1 << 20), 0)
    os.fdatasync(fd)
    before, started = sectors(device), time.perf_counter()
    for k in range(N):
        os.pwrite(fd, REC, k * len(REC))
        os.fdatasync(fd)
    result = ((sectors(device) - before) / 2 / N, (time.perf_counter() - started) / N * 1e6)
    os.close(fd)
    os.remove(path)
    return result


def main() -> None:
    device = os.environ.get("DEVICE", "vda")
    with tempfile.TemporaryDirectory(dir=sys.argv[1] if len(sys.argv) > 1 else None) as directory:
        for _ in range(4):
            g, p = grow(directory, device), prepared(directory, device)
            print(f"growing {g[0]:5.1f} KiB/fsync {g[1]:6.0f} us/op   "
                  f"preallocated {p[0]:5.1f} KiB/fsync {p[1]:6.0f} us/op", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
