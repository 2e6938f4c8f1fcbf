"""The SDK's instructions per send, client process only, for callgrind: one-in-flight single sends and
100-message batches (``tx_client_cpu.py`` is the transactional counterpart, ``asyncclient_cg.sh`` the
pipelined one).

* ``single``: one ``Producer.send`` of 1 KB awaited after another (one request in flight, the
  single-1 shape) to one pinned queue;
* ``batch``: one ``Producer.send_batch`` of 100 x 1 KB awaited after another (the batch-100 shape).

The broker is a ``txmq broker`` subprocess (async flush: no fsync wait); valgrind does not follow it.
Run at two counts and divide the difference of the totals by the difference of the counts (the start,
the warm-up and the exit cancel)::

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/sdk-single-200.out \\
        python benchmarks/sdk_client_cg.py single 200
    PYTHONPATH=src valgrind ... --callgrind-out-file=/tmp/sdk-single-700.out ... single 700
    per send = (I(700) - I(200)) / 500     (batch: per request, divide by 100 more for per message)

Without valgrind it prints the process CPU (``process_time``) per request.
Usage: ``python benchmarks/sdk_client_cg.py {single,batch} N [--warmup 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.grpc_harness import BrokerProcess  # noqa: E402

from txmq.client import Message, Producer  # noqa: E402
from txmq.server.runtime import install_uvloop  # noqa: E402

TOPIC = "SdkClientCg"
BODY = b"x" * 1024


async def run(endpoint: str, mode: str, count: int, warmup: int) -> float:
    async with Producer(endpoint, group="pgSdkClientCg") as producer:
        # the first send fetches the route; then every request goes to the same queue
        first = await producer.send(Message(TOPIC, BODY))
        queue = first.queue
        if mode == "single":
            for _ in range(warmup):
                await producer.send(Message(TOPIC, BODY), queue=queue)
            c0 = time.process_time()
            for _ in range(count):
                await producer.send(Message(TOPIC, BODY), queue=queue)
        else:
            for _ in range(warmup):
                await producer.send_batch([Message(TOPIC, BODY) for _ in range(100)], queue=queue)
            c0 = time.process_time()
            for _ in range(count):
                await producer.send_batch([Message(TOPIC, BODY) for _ in range(100)], queue=queue)
        return time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["single", "batch"])
    parser.add_argument("count", type=int)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), extra_args=["--flush", "async"])
        broker.start()
        try:
            install_uvloop()
            cpu = asyncio.run(run(f"127.0.0.1:{broker.namesrv_port}", args.mode, args.count, args.warmup))
        finally:
            broker.stop()
    print(f"client CPU {cpu / args.count * 1e6:.1f} us per {args.mode} request ({args.count} requests)")


if __name__ == "__main__":
    main()
