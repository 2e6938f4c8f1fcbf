"""CPU per relayed round trip of the permissive gRPC front (``server/grpc_front.py``), its backend over
loopback TCP or over an abstract Unix socket (what the broker uses).

The front and an echo backend (answers 300 bytes per request, like grpc answering a send) run in this
process on uvloop, as in the broker; a child process sends N 1,200-byte requests one at a time. Printed:
this process's CPU time per round trip (deterministic enough on a shared machine; alternate the kinds)
and the client's mean round trip.

Usage: ``python benchmarks/grpc_relay_cost.py tcp|unix [N]``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from txmq.server.grpc_front import GrpcFront
from txmq.server.runtime import install_uvloop

CLIENT = r"""
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
data, n = b"P" + b"x" * 1199, int(sys.argv[2])
start = time.perf_counter()
for _ in range(n):
    s.sendall(data)
    got = 0
    while got < 300:
        got += len(s.recv(65536))
print(f"  client: {(time.perf_counter() - start) / n * 1e6:.1f} us mean round trip")
"""


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data[:300])
    except ConnectionError:
        pass
    writer.close()


async def main(kind: str, n: int) -> None:
    if kind == "tcp":
        backend = await asyncio.start_server(_echo, "127.0.0.1", 0)
        where: int | str = backend.sockets[0].getsockname()[1]
    else:
        where = f"\0txmq-relay-cost-{os.getpid()}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(where)
        sock.listen()
        sock.setblocking(False)
        backend = await asyncio.start_unix_server(_echo, sock=sock)
    front = await GrpcFront.bind("127.0.0.1", 0, connections_max=4)
    await front.route(where, where)
    start = time.process_time()
    client = await asyncio.create_subprocess_exec(sys.executable, "-c", CLIENT, str(front.port), str(n))
    await client.wait()
    cpu = (time.process_time() - start) / n * 1e6
    print(f"{kind}: {cpu:.1f} us CPU per relayed round trip (front + echo backend)")
    await front.close()
    backend.close()


if __name__ == "__main__":
    install_uvloop()
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20_000))
