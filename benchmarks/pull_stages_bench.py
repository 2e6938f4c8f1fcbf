"""CPU per message of the broker's answer to a large pull, stage by stage, in one process (no sockets).

An in-process broker (async flush, a temp dir) holds ``--messages`` messages of ``--size`` bytes in one
queue; each round pulls them all in pulls of ``--batch`` and times, with ``time.process_time``:

- ``read``: ``pull_raw`` (``tests/pull_oracle.py``, the staged path before the fused one; consume
  queue units, one pread per run, ``codec.split_checked`` per
  record: header unpack, CRC32C check, raw field tuple);
- ``pulled``: ``pulled`` (``tests/pull_oracle.py``; wire hosts from the names cache, a tuple per record);
- ``encode``: ``encode_pulled`` (``tests/pull_oracle.py``; a struct pack and a body CRC-32 per record,
  one join);
- ``fused``: what the remoting handler runs instead of the three: ``Broker.pull_into`` with the remoting
  ``PullSink`` and its ``body()`` (each record checked and packed straight from the pread buffer).

What the remoting handler adds on top (request parsing, the socket write) is not in these figures; the
whole broker process is measured by ``spark_bench.py --raw-only``. The body CRC-32 implementation in use
(``txmq.common.crc.IMPLEMENTATION``) is printed.

    python benchmarks/pull_stages_bench.py [--messages 20480] [--size 1024] [--batch 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "src"))

from tests.broker.conftest import make_config
from tests.pull_oracle import encode_pulled, pull_raw, pulled

from txmq.broker.broker import Broker
from txmq.broker.send import SendContext
from txmq.common.clock import FakeClock
from txmq.common.crc import IMPLEMENTATION
from txmq.common.message import Message
from txmq.server.remoting.convert import PullSink
from txmq.storage.api import FlushMode


async def run(messages: int, size: int, batch: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = make_config(Path(tmp) / "data", flush=FlushMode.ASYNC, segment_bytes=1 << 30)
        broker = await Broker.open(config, clock=FakeClock(start_ms=1_800_000_000_000))
        try:
            context = SendContext(producer_group="pg", born_host="10.0.0.7:4321", queue_id=0)
            body = b"x" * size
            for first in range(0, messages, 256):
                count = min(256, messages - first)
                await broker.send(
                    [Message(topic="T", body=body, keys=(f"k{first + i}",)) for i in range(count)], context
                )
            for r in range(rounds):
                read = convert = encode = 0.0
                n = offset = 0
                while offset < messages:
                    t0 = time.process_time()
                    result = await pull_raw(
                        broker,
                        group="g", topic="T", queue_id=0, offset=offset, batch_size=batch, expression=None,
                        long_poll_ms=0, max_bytes=8 << 20,
                    )  # fmt: skip
                    t1 = time.process_time()
                    records = pulled(result.records, "T", lambda _: b"")
                    t2 = time.process_time()
                    encode_pulled("T", records)
                    t3 = time.process_time()
                    read, convert, encode = read + t1 - t0, convert + t2 - t1, encode + t3 - t2
                    n += len(result.records)
                    offset = result.next_offset
                fused = 0.0
                offset = 0
                while offset < messages:
                    t0 = time.process_time()
                    sink = PullSink("T", lambda _: b"")
                    result = await broker.pull_into(
                        sink, group="g", topic="T", queue_id=0, offset=offset, batch_size=batch,
                        expression=None, long_poll_ms=0, max_bytes=8 << 20,
                    )  # fmt: skip
                    sink.body()
                    fused += time.process_time() - t0
                    offset = result.next_offset
                per = 1e6 / max(n, 1)
                print(f"round {r + 1} [crc32: {IMPLEMENTATION}] CPU us/msg: read {read * per:.2f}, "
                      f"pulled {convert * per:.2f}, encode {encode * per:.2f}, "
                      f"total {(read + convert + encode) * per:.2f}; fused {fused * per:.2f}")  # fmt: skip
        finally:
            await broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_480)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.messages, args.size, args.batch, args.rounds))


if __name__ == "__main__":
    main()
