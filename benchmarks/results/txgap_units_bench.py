"""CPU of reading half-queue units 512 at a time: ``queue_units`` (a QueueUnit object each) against
``queue_raw_units`` (tuples), alternated three times (txgap.md).

    PYTHONPATH=src python benchmarks/results/txgap_units_bench.py
"""

from __future__ import annotations

import tempfile
import time

from txmq.common.clock import FakeClock
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.store import MessageStore


def main() -> None:
    store = MessageStore.open(StoreConfig(data_dir=tempfile.mkdtemp()), clock=FakeClock())
    for i in range(2048):
        store.put_nowait(PutRequest("H", 0, b"x" * 100, properties=b"", tags_code=i))
    store.flush()
    rounds = 400
    for name in ("queue_units", "queue_raw_units") * 3:
        read = getattr(store, name)
        start = time.process_time()
        for r in range(rounds):
            read("H", 0, (r * 512) % 1536, 512)
        print(f"{name:16} {(time.process_time() - start) / rounds / 512 * 1e9:7.0f} ns per unit")
    store.close()


if __name__ == "__main__":
    main()
