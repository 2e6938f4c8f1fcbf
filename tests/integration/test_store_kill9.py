"""A real crash: a child process appends in SYNC mode and prints each acknowledged record; the
parent SIGKILLs it at a random moment, reopens the store and checks every acknowledged record."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import subprocess_env
from txmq.storage.api import StoreConfig
from txmq.storage.store import MessageStore

CHILD = r"""
import asyncio, sys
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.store import MessageStore

async def main(data_dir: str, round_id: str) -> None:
    store = MessageStore.open(StoreConfig(data_dir=data_dir, segment_bytes=64 * 1024))
    await store.start()
    out = sys.stdout
    counter = 0

    async def writer(queue_id: int) -> None:
        nonlocal counter
        while True:
            counter += 1
            body = f"{round_id}-{counter}".encode() * 20
            result = await store.put(PutRequest("KILL", queue_id, body))
            out.write(f"{queue_id} {result.queue_offset} {result.physical_offset} {body[:24].decode()}\n")
            out.flush()

    await asyncio.gather(*(writer(q % 4) for q in range(16)))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _wait_for_lines(proc: subprocess.Popen[bytes], out_path: Path, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.returncode}")
        if out_path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.01)
    raise AssertionError("child produced too few acknowledgements in time")


def test_kill_9_loses_no_acknowledged_record(tmp_path: Path, home_dir: Path) -> None:
    seed = int(os.environ.get("TXMQ_SEED", random.randrange(2**32)))
    print(f"seed={seed}")
    rng = random.Random(seed)
    data_dir = tmp_path / "store"
    acked: dict[tuple[int, int], str] = {}
    for round_id in range(5):
        out_path = tmp_path / f"round{round_id}.out"
        with out_path.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(data_dir), f"r{round_id}"],
                stdout=out, stderr=subprocess.PIPE, env=subprocess_env(home_dir),
            )  # fmt: skip
            try:
                _wait_for_lines(proc, out_path, rng.randint(20, 400), timeout_s=60)
                time.sleep(rng.random() * 0.05)
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
        for line in out_path.read_text().splitlines(keepends=True):
            if line.endswith("\n"):
                queue_id, queue_offset, _, body = line.split()
                acked[(int(queue_id), int(queue_offset))] = body
        store = MessageStore.open(StoreConfig(data_dir=str(data_dir), segment_bytes=64 * 1024))
        for (queue_id, queue_offset), body in acked.items():
            read = store.read_queue("KILL", queue_id, queue_offset, 1)
            assert read.records, f"acknowledged record {queue_id}/{queue_offset} lost (seed {seed})"
            assert read.records[0].body.decode().startswith(body), f"wrong record (seed {seed})"
        for queue_id in range(4):
            offsets = [r.queue_offset for r in store.read_queue("KILL", queue_id, 0, 1024).records]
            assert offsets == list(range(len(offsets))), "queue offsets are dense"
        asyncio.run(store.close())
    assert len(acked) >= 100
