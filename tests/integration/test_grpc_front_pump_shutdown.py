"""A ``txmq broker`` on its default permissive gRPC port (the front, its joined connections pumped by
``server/_relaypump.c`` when built) still stops cleanly and promptly on SIGTERM with relayed
connections open: a client idle on a joined connection sees its end, and the broker exits 0."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

from txmq.server.grpc_front import PUMP

from .grpc_harness import BrokerProcess

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")  # + an empty SETTINGS


def test_sigterm_with_joined_connections_open_exits_cleanly_and_ends_them(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path)
    broker.start()
    clients = []
    assert broker.proc is not None
    tasks = Path(f"/proc/{broker.proc.pid}/task")
    try:
        threads_before = len(list(tasks.iterdir()))
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
            sock.sendall(PREFACE)
            first = sock.recv(9)  # the backend's SETTINGS frame header: relayed, so joined
            assert len(first) >= 4 and first[3] == 0x04, first
            clients.append(sock)
        if PUMP is not None:  # built: each joined connection is two pump threads
            for _ in range(100):
                if len(list(tasks.iterdir())) >= threads_before + 6:
                    break
                time.sleep(0.05)
            assert len(list(tasks.iterdir())) >= threads_before + 6
        proc = broker.proc
        assert proc is not None
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0, "".join(broker.output[-30:])
        assert time.monotonic() - started < 10
        for sock in clients:  # each sees its end (grpc's GOAWAY first, maybe)
            sock.settimeout(10)
            while sock.recv(65536):
                pass
    finally:
        for sock in clients:
            sock.close()
        broker.stop()
