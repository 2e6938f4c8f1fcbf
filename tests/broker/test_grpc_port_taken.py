"""A second broker given a gRPC port another broker listens on fails to start (it used to share it)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tests.broker.conftest import make_config
from txmq.broker.broker import Broker
from txmq.server.grpc_server import serve


async def test_a_taken_grpc_port_fails_instead_of_being_shared(tmp_path: Path) -> None:
    """Regression: gRPC binds with SO_REUSEPORT by default, so the second ``serve`` on a taken port
    succeeded and the kernel split new connections between the two brokers (a test harness saw
    messages vanish into the other test's broker when two picked the same free port)."""
    first = await Broker.open(make_config(tmp_path / "a"))
    second = await Broker.open(make_config(tmp_path / "b"))
    server = await serve(first, "127.0.0.1", 0)
    try:
        with pytest.raises(OSError) as caught:
            await serve(second, "127.0.0.1", server.txmq_port)
        assert caught.value.errno == errno.EADDRINUSE
        assert f"127.0.0.1:{server.txmq_port}" in str(caught.value)
    finally:
        await server.stop(grace=None)
        await first.close()
        await second.close()
