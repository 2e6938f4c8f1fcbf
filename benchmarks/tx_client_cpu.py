"""Producer-side CPU per transaction: one ``TransactionProducer`` (remoting, a listener that commits),
transactions one after another against a ``txmq broker`` subprocess (async flush: no fsync wait), after
a warm-up. For deterministic counts run it under callgrind twice with different ``N`` and divide the
difference of the instruction totals by the difference of ``N`` (only this process is traced, the
broker subprocess is not)::

    valgrind --tool=callgrind --trace-children=no --callgrind-out-file=cg.200 \\
        python benchmarks/tx_client_cpu.py 200
    valgrind ... --callgrind-out-file=cg.700 python benchmarks/tx_client_cpu.py 700

Without valgrind it prints the process CPU (``process_time``) per transaction.
Usage: ``python benchmarks/tx_client_cpu.py N [--warmup 200] [--listener sync|async]``.

``--listener sync`` (the default) is a blocking listener: each call runs on a worker thread
(``_transaction.Workers``) and its answer comes back to the loop. ``--listener async`` has ``async def``
methods, awaited on the loop with no thread hop: the shape ``txmq bench``'s tx-8 workload uses
(``benchmarks/harness/drivers/txmq.py``, ``_CommitAtOnce``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.integration.grpc_harness import BrokerProcess  # noqa: E402

from txmq.client import LocalTransactionState, Message, TransactionProducer  # noqa: E402
from txmq.server.runtime import install_uvloop  # noqa: E402

BODY = b"x" * 1024


class Commit:
    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


class AsyncCommit:
    async def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    async def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def run(endpoint: str, count: int, warmup: int, listener: Any) -> float:
    async with TransactionProducer("pgClientCpu", listener, endpoint) as producer:
        for _ in range(warmup):
            await producer.send_message_in_transaction(Message("TxClientCpu", BODY))
        c0 = time.process_time()
        for _ in range(count):
            await producer.send_message_in_transaction(Message("TxClientCpu", BODY))
        return time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", type=int)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--listener", choices=("sync", "async"), default="sync")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), extra_args=["--flush", "async"])
        broker.start()
        try:
            install_uvloop()
            listener = Commit() if args.listener == "sync" else AsyncCommit()
            cpu = asyncio.run(run(f"127.0.0.1:{broker.namesrv_port}", args.count, args.warmup, listener))
        finally:
            broker.stop()
    print(f"client CPU {cpu / args.count * 1e6:.1f} us per transaction ({args.count} transactions)")


if __name__ == "__main__":
    main()
