"""Start a broker, preload N x 1 KiB into topic B (4 queues), write its namesrv and pid, wait for kill."""

import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.environ["TREE"])
sys.path.insert(0, os.environ["TREE"] + "/src")
from benchmarks.spark_bench import preload
from tests.client.broker import BrokerProcess
from tests.client.conftest import create_topic

n = int(sys.argv[1])
out = Path(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    broker = BrokerProcess(Path(tmp), "--flush", "async", "--default-queues", "4")
    broker.start()
    try:
        asyncio.run(create_topic(broker, "B", 4))
        asyncio.run(preload(broker, "B", n, 1024, 4))
        out.write_text(f"{broker.namesrv} {broker.process.pid}")
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
    finally:
        broker.stop()
