"""Single SendMessage calls through real grpc.aio in one process, for callgrind instruction counts.

A real ``Broker`` (sync flush, no background tick) behind ``grpc_server.serve`` on a loopback port (no
front), and a grpc.aio client in the same loop sending one 1 KB message per call, one call in flight,
with the seven metadata headers the official clients send. Client and server are both counted, so
compare trees, not servers; nothing here depends on wall-clock time except the fsync's
inline-or-thread choice. Instructions per call = (run of N2 calls - run of N1 calls) / (N2 - N1)::

    for n in 100 600; do PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n.out \\
        python benchmarks/grpc_single_cost.py $n; done

Without valgrind it prints the process CPU per call (fsync included).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

import grpc

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common.clock import SystemClock
from txmq.protocol.grpc import pb
from txmq.server.grpc_server import serve
from txmq.server.runtime import install_uvloop, tune_gc
from txmq.storage.api import FlushMode

# after txmq: grpc_bench puts this checkout's src first on sys.path, and PYTHONPATH picks the tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpc_bench import TOPIC_SEND, Target, send_request

METADATA = (  # what the official Python client sends with every call
    ("x-mq-language", "PYTHON"),
    ("x-mq-client-id", "cost@1@0@1"),
    ("x-mq-client-version", "5.0.0"),
    ("x-mq-protocol", "v2"),
    ("x-mq-request-id", "0b6b7bd6-6b35-4d1f-9d2c-2a0d1c1f3e40"),
    ("x-mq-date-time", "20261124T000000Z"),
    ("x-mq-namespace", ""),
)


async def run(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.SYNC), clock=SystemClock())
        server = await serve(broker, "127.0.0.1", 0)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.txmq_port}") as channel:
                stub = pb.MessagingServiceStub(channel)
                target = Target("txmq", server.txmq_port, 0, stub, channel, itertools.count())
                requests = [send_request(target, TOPIC_SEND, 1) for _ in range(calls + 20)]
                for request in requests[:20]:  # the topic is created, every lazy cache filled
                    await stub.SendMessage(request, metadata=METADATA)
                start = time.process_time()
                for request in requests[20:]:
                    reply = await stub.SendMessage(request, metadata=METADATA)
                    assert reply.status.code == pb.Code.OK, reply.status.message
                cpu = time.process_time() - start
                print(f"{cpu / calls * 1e6:.1f} us/call process CPU (client and server)")
        finally:
            await server.stop(grace=None)
            await broker.close()


def main() -> None:
    install_uvloop()
    tune_gc()
    asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 500))


if __name__ == "__main__":
    main()
