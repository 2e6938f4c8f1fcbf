"""The gRPC door's SendMessage handler in process, for instruction counts per message (callgrind).

``MessagingServicer.SendMessage`` is handed a 100 x 1 KB SendMessageRequest's bytes (as grpc hands
them to it) with 8 calls in flight, over a real ``Broker`` with sync flush (group commit, fdatasync,
dispatch, key index): everything the broker does for a batched send except grpc's own transport and
the permissive front's relay. Every call carries fresh message ids (one ``bytes.replace`` of the id
prefix per call, ~300 instructions a message in both trees), as ``grpc_bench.py``'s client sends them.

Instructions per message = (run of N2 rounds - run of N1 rounds) / (8 x (N2 - N1) x 100), so start-up
and imports cancel out::

    for n in 10 60; do PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n.out \\
        python benchmarks/grpc_send_cost.py $n; done

Without valgrind it prints the process CPU per message (all threads, fsync included).

``--single`` (second argument): the pipelined workload instead, one message per call and 64 calls in
flight (``grpc_bench.py``'s ``pipelined``); N rounds are N calls per caller, so instructions per call =
(run of N2 - run of N1) / (64 x (N2 - N1)).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpc_micro import _request_bytes

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common.clock import SystemClock
from txmq.server.grpc_server import MessagingServicer
from txmq.server.runtime import install_uvloop, tune_gc
from txmq.storage.api import FlushMode

INFLIGHT = 8
SINGLE_INFLIGHT = 64


class Context:
    """What the handler reads of a grpc.aio context."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-mq-client-id", "cost@1"),)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


def _single_request_bytes() -> bytes:
    """One message of ``_request_bytes``' batch as its own SendMessageRequest."""
    whole = _request_bytes()
    # the first field: tag 0x0A, a two-byte length varint (a 1 KB message), then the message
    size = (whole[1] & 0x7F) | (whole[2] << 7)
    return whole[: 3 + size]


async def run(rounds: int, single: bool = False) -> None:
    data = _single_request_bytes() if single else _request_bytes()
    inflight, per_call = (SINGLE_INFLIGHT, 1) if single else (INFLIGHT, 100)
    ids = itertools.count(1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.SYNC), clock=SystemClock())
        servicer = MessagingServicer(broker, "127.0.0.1", 8081)
        context: Any = Context()

        async def caller(calls: int) -> None:
            for _ in range(calls):
                reply = await servicer.SendMessage(data.replace(b"01BENCH", b"%07d" % next(ids)), context)
                assert reply.__class__ is bytes, reply

        await caller(5)  # the topic is created, every lazy cache filled
        start = time.process_time()
        await asyncio.gather(*(caller(rounds) for _ in range(inflight)))
        cpu = time.process_time() - start
        print(f"{cpu / (inflight * rounds * per_call) * 1e6:.2f} us/msg process CPU")
        await broker.close()


def main() -> None:
    install_uvloop()
    tune_gc()
    asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 60, "--single" in sys.argv[2:]))


if __name__ == "__main__":
    main()
