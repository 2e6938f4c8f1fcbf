"""The key index alone: RSS it holds for ``--keys`` indexed messages, add throughput, lookup latency
and reload time, for one or more source trees side by side (A B A B), each run in a fresh process.

    python -m benchmarks.index_bench --keys 1000000 --src /path/to/old/src --src src --rounds 2

Every message has one unique key (like a message id, which the broker always indexes); records are
written in groups of ``--group`` like the dispatcher does after a group commit. Phase ``write`` indexes
them into an empty directory; phase ``load`` opens that directory in a new process (a broker restart)
and looks keys up. RSS is the growth of ``RssAnon`` (/proc, Linux) over the process before the index
was created. The machine may be shared: times are indicative, RSS is the figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

MiB = 1024 * 1024


def rss_anon_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def keys_of(topic: str, properties: bytes) -> list[str]:
    return [properties.decode()]


def _key(number: int) -> str:
    return f"7F00000100002A9F0000{number:012X}"  # shaped like a message id


def _lookups(index: Any, keys: int, count: int) -> dict[str, float]:
    rng = random.Random(7)
    present = [rng.randrange(keys) for _ in range(count)]
    times: list[float] = []
    for number in present:
        start = time.perf_counter()
        found = index.lookup(_key(number), 32, 0, 2**62, 0)
        times.append(time.perf_counter() - start)
        assert found == [number * 1000], (number, found)
    missing: list[float] = []
    for number in range(count):
        start = time.perf_counter()
        assert index.lookup(f"absent-{number}", 32, 0, 2**62, 0) == []
        missing.append(time.perf_counter() - start)
    times.sort()
    missing.sort()
    return {
        "lookup_p50_us": times[len(times) // 2] * 1e6,
        "lookup_p99_us": times[int(len(times) * 0.99)] * 1e6,
        "lookup_absent_p50_us": missing[len(missing) // 2] * 1e6,
    }


def child(phase: str, directory: str, keys: int, group: int) -> dict[str, Any]:
    from txmq.storage.fs import OsFileSystem
    from txmq.storage.index import KeyIndex

    gc.collect()
    before = rss_anon_bytes()
    index = KeyIndex(OsFileSystem(), directory, keys_of)
    start = time.perf_counter()
    index.load()
    result: dict[str, Any] = {"load_s": time.perf_counter() - start}
    if phase == "write":
        start = time.perf_counter()
        for number in range(keys):
            index.add("T", _key(number).encode(), number * 1000, 1_700_000_000_000 + number)
            if number % group == group - 1:
                index.write()
        index.write()
        index.sync()
        result["add_per_s"] = keys / (time.perf_counter() - start)
    gc.collect()
    result["rss_mib"] = (rss_anon_bytes() - before) / MiB
    result.update(_lookups(index, keys, 2000))
    index.close()
    return result


def run(src: str, keys: int, group: int) -> dict[str, Any]:
    directory = tempfile.mkdtemp(prefix="txmq-index-bench-")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    try:
        out: dict[str, Any] = {}
        for phase in ("write", "load"):
            args = [sys.executable, os.path.abspath(__file__), "--child", phase, "--dir", directory]
            args += ["--keys", str(keys), "--group", str(group)]
            done = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
            out[phase] = json.loads(done.stdout)
        disk = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))
        out["disk_mib"] = disk / MiB
        return out
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--group", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--src", action="append", help="a source tree (PYTHONPATH); repeat to compare")
    parser.add_argument("--child", choices=["write", "load"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write every run here")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.dir, args.keys, args.group)))
        return
    sources = args.src or ["src"]
    runs: dict[str, list[dict[str, Any]]] = {src: [] for src in sources}
    for round_number in range(args.rounds):
        for src in sources:
            result = run(src, args.keys, args.group)
            runs[src].append(result)
            print(f"round {round_number} {src}: {json.dumps(result)}", flush=True)
    print(f"\n{args.keys:,} keys, median of {args.rounds} rounds (machine may be shared)")
    print("src | write RSS MiB | adds/s | load s | load RSS MiB | lookup p50 us | p99 us | absent p50 us")
    for src, results in runs.items():

        def median(phase: str, field: str, results: list[dict[str, Any]] = results) -> float:
            return statistics.median(result[phase][field] for result in results)

        row = [
            src,
            f"{median('write', 'rss_mib'):.1f}",
            f"{median('write', 'add_per_s'):,.0f}",
            f"{median('load', 'load_s'):.2f}",
            f"{median('load', 'rss_mib'):.1f}",
            f"{median('load', 'lookup_p50_us'):.1f}",
            f"{median('load', 'lookup_p99_us'):.1f}",
            f"{median('load', 'lookup_absent_p50_us'):.1f}",
        ]
        print(" | ".join(row))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"command": sys.argv, "runs": runs}, out, indent=1)


if __name__ == "__main__":
    main()
