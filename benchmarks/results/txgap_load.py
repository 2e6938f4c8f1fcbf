"""Eight transactional producer processes against a running broker (txgap.md's callgrind load).

python benchmarks/results/txgap_load.py NAMESRV_HOST:PORT SECONDS    (topic ``bench`` must exist)
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.harness.drivers.txmq import listener

from txmq.client import Message, TransactionProducer


def worker(endpoint: str, index: int, seconds: float, done: multiprocessing.Queue[int]) -> None:
    async def go() -> None:
        producer = TransactionProducer(f"cg-p{index}", listener(), endpoint, transport="remoting")
        await producer.start()
        count = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await producer.send_message_in_transaction(Message("bench", b"x" * 100))
            count += 1
        await producer.close()
        done.put(count)

    asyncio.run(go())


def main() -> None:
    endpoint, seconds = sys.argv[1], float(sys.argv[2])
    done: multiprocessing.Queue[int] = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(endpoint, i, seconds, done)) for i in range(8)]
    for proc in procs:
        proc.start()
    print("total", sum(done.get() for _ in procs))
    for proc in procs:
        proc.join()


if __name__ == "__main__":
    main()
