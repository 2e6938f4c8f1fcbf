"""Instructions per message of the broker's pull answer (read + wire body), for callgrind A/B.

An in-process broker holds 4096 messages of SIZE bytes (keys and a born host, as producers send them)
in one queue; ROUNDS times, the queue is read in pulls of BATCH and each pull's wire body built:

- ``staged``: ``pull_raw``, ``pulled``, ``encode_pulled`` (the path before the fused one, kept in
  ``tests/pull_oracle.py``);
- ``fused``: ``Broker.pull_into`` with the remoting ``PullSink`` and its ``body()`` (what the remoting
  PULL_MESSAGE handler runs).

Run at two round counts and take the difference, so start-up and the writes cancel out::

    PYTHONHASHSEED=0 PYTHONPATH=<checkout>/src valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \\
        python benchmarks/pull_body_cg.py MODE ROUNDS SIZE BATCH
    # instructions/msg = (Ir(ROUNDS=3) - Ir(ROUNDS=1)) / (2 * 4096)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.pull_oracle

from tests.pull_oracle import encode_pulled, pull_raw, pulled

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.send import SendContext
from txmq.common.clock import FakeClock
from txmq.common.message import Message
from txmq.server.remoting import convert
from txmq.storage.api import FlushMode

N = 4096


async def run(mode: str, rounds: int, size: int, batch: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = BrokerConfig(data_dir=str(Path(tmp) / "data"), flush=FlushMode.ASYNC, segment_bytes=1 << 28)
        broker = await Broker.open(config, clock=FakeClock(start_ms=1_800_000_000_000))
        try:
            context = SendContext(producer_group="pg", born_host="10.0.0.7:4321", queue_id=0)
            body = b"x" * size
            for first in range(0, N, 256):
                await broker.send(
                    [Message(topic="T", body=body, keys=(f"k{first + i}",)) for i in range(256)], context
                )
            total = 0
            for _ in range(rounds):
                offset = 0
                while offset < N:
                    kw = {"group": "g", "topic": "T", "queue_id": 0, "offset": offset, "batch_size": batch,
                          "max_bytes": 8 << 20}  # fmt: skip
                    if mode == "fused":
                        sink = convert.PullSink("T", lambda _: b"")
                        result = await broker.pull_into(sink, **kw)  # type: ignore[arg-type]
                        total += len(sink.body())
                    else:
                        result = await pull_raw(broker, **kw)  # type: ignore[arg-type]
                        total += len(encode_pulled("T", pulled(result.records, "T", lambda _: b"")))
                    offset = result.next_offset
            print(mode, rounds, total)
        finally:
            await broker.close()


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
