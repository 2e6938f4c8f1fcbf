"""The suite's processes fork safely while gRPC threads are busy (tests/conftest.py turns gRPC's fork
support off): pyspark starts its JVM with ``preexec_fn``, a plain fork(), after earlier test modules
left gRPC channels running, and the Spark session fixture failed "Java gateway process exited before
sending its port number"."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import subprocess, threading, time
from concurrent import futures
import grpc

server = grpc.server(futures.ThreadPoolExecutor(4))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
busy = True

def hammer():
    call = grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary("/x/y")
    while busy:
        try:
            call(b"", timeout=0.05)
        except grpc.RpcError:
            pass

for _ in range(3):
    threading.Thread(target=hammer, daemon=True).start()
time.sleep(0.5)
codes = [subprocess.run(["sh", "-c", "exit 7"], preexec_fn=lambda: None).returncode for _ in range(30)]
busy = False
print("exit codes", sorted(set(codes)), flush=True)
"""


def test_fork_with_preexec_fn_while_grpc_threads_are_busy() -> None:
    assert os.environ.get("GRPC_ENABLE_FORK_SUPPORT") == "0"  # set by tests/conftest.py
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exit codes [7]" in done.stdout, (done.stdout, done.stderr[-2000:])
