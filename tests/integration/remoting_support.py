"""A ``txmq broker`` subprocess on free ports, and small remoting helpers for the tests that talk to it."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import PYTHON, START_ATTEMPTS, OutputPump, free_port, port_taken, subprocess_env
from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common import properties as props
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.headers import SendMessageRequestHeaderV2
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint, RemotingServer, connect, serve
from txmq.storage.api import FlushMode
from txmq.storage.fs import FaultyFileSystem


@dataclass(frozen=True)
class RunningBroker:
    process: subprocess.Popen[str]
    host: str
    grpc_port: int
    remoting_port: int
    namesrv_port: int

    @property
    def namesrv_addr(self) -> str:
        return f"{self.host}:{self.namesrv_port}"


def wait_for_line(process: subprocess.Popen[str], needle: str, timeout_s: float = 30.0) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        if needle in line:
            return line
    process.kill()
    err = process.stderr.read() if process.stderr else ""
    raise AssertionError(f"{needle!r} never printed; stdout={''.join(seen)!r} stderr={err[-3000:]!r}")


def start_namesrv(home: Path) -> tuple[subprocess.Popen[str], int]:
    """A name server on a free port; a start that finds the port taken meanwhile retries on a fresh one."""
    for _ in range(START_ATTEMPTS):
        port = free_port()
        namesrv = subprocess.Popen(
            [PYTHON, "-m", "txmq", "namesrv", "--port", str(port)],
            env=subprocess_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        output = OutputPump(namesrv)
        if output.wait_for("txmq namesrv ready on", 30):
            return namesrv, port
        namesrv.kill()
        namesrv.wait()
        if not port_taken(output.text()):
            break
    raise AssertionError(f"the name server did not start: {output.text()}")


@contextlib.contextmanager
def broker_process(tmp: Path, *extra: str) -> Iterator[RunningBroker]:
    """A broker on free ports; a start that finds a port taken meanwhile retries on fresh ones."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    for _ in range(START_ATTEMPTS):
        ports = free_port(), free_port(), free_port()
        command = [
            PYTHON, "-m", "txmq", "broker", "--data-dir", str(tmp / "data"), "--port", str(ports[0]),
            "--remoting-port", str(ports[1]), "--namesrv-port", str(ports[2]), "--transaction-timeout", "0s",
            "--transaction-check-interval", "200ms", *extra,
        ]  # fmt: skip
        process = subprocess.Popen(
            command, env=subprocess_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        output = OutputPump(process)  # drained for the broker's whole life, not just until ready
        if output.wait_for("txmq broker ready on", 30):
            break
        _stop(process)
        if not port_taken(output.text()):
            break
    else:
        raise AssertionError(f"the broker never found free ports: {output.text()}")
    if process.returncode is not None:
        raise AssertionError(f"the broker did not start: {output.text()}")
    try:
        yield RunningBroker(process, "127.0.0.1", *ports)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def send_header(
    topic: str, properties: dict[str, str], *, queue_id: int = 0, sys_flag: int = 0, group: str = "PG"
) -> dict[str, str]:
    return SendMessageRequestHeaderV2(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), flag=0,
        properties=props.encode(properties).decode(),
    ).to_ext_fields()  # fmt: skip


async def send(
    endpoint: RemotingEndpoint, topic: str, body: bytes, properties: dict[str, str] | None = None, **kw: Any
) -> RemotingCommand:
    return await endpoint.request(
        RequestCode.SEND_MESSAGE_V2, send_header(topic, properties or {}, **kw), body
    )


@dataclass
class Door:
    """An in-process broker on a FaultyFileSystem (ASYNC flush) behind the real remoting transport."""

    broker: Broker
    fs: FaultyFileSystem
    server: RemotingServer
    client: RemotingEndpoint


@contextlib.asynccontextmanager
async def in_process_door() -> AsyncIterator[Door]:
    fs = FaultyFileSystem()
    broker = await Broker.open(BrokerConfig(data_dir="/data", flush=FlushMode.ASYNC), fs=fs)
    server = await serve("127.0.0.1", 0, make_handler(RemotingContext(broker, "127.0.0.1:10911")))
    client = await connect("127.0.0.1", server.port)
    try:
        yield Door(broker, fs, server, client)
    finally:
        await client.close()
        await server.close()
        await broker.close()
