"""``txmq broker`` with every port 0: the system picks them, the ready line names the gRPC port really
bound (it said ``:0``), and the log names the remoting and name-server ports; clients reach all three.
A real broker process."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
from pathlib import Path

from tests.conftest import PYTHON, OutputPump, subprocess_env
from txmq.client import Message, Producer


def test_ports_given_as_zero_are_reported_as_bound(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [PYTHON, "-m", "txmq", "broker", "--port", "0", "--remoting-port", "0", "--namesrv-port", "0",
         "--flush", "async", "--log-level", "INFO"],
        cwd=tmp_path,
        env=subprocess_env(tmp_path / "home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    output = OutputPump(process)
    try:
        assert output.wait_for("txmq broker ready on", 60), output.text()
        text = output.text()
        grpc_port = int(re.search(r"ready on 127\.0\.0\.1:(\d+)", text).group(1))  # type: ignore[union-attr]
        found = re.search(r"remoting on port (\d+), name server on port (\d+)", text)
        assert found is not None, text
        remoting_port, namesrv_port = int(found.group(1)), int(found.group(2))
        assert 0 not in (grpc_port, remoting_port, namesrv_port)
        with socket.create_connection(("127.0.0.1", grpc_port), timeout=10):
            pass

        async def send_through_the_name_server() -> str:
            async with Producer(f"127.0.0.1:{namesrv_port}", group="port-zero") as producer:
                result = await producer.send(Message("PortZero", b"hello"))
            return result.message_id

        assert asyncio.run(send_through_the_name_server())
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
