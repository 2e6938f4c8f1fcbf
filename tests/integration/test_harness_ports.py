"""The test harnesses' brokers survive a port taken between ``free_port()`` and the broker's ``bind``
(another test run on the same host picked it too): the first start retries on fresh ports."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.broker import BrokerProcess as ClientBroker
from tests.integration.grpc_harness import BrokerProcess as GrpcBroker


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_client_harness_retries_a_first_start_on_a_taken_port(tmp_path: Path, taken_port: int) -> None:
    broker = ClientBroker(tmp_path)
    broker.remoting_port = taken_port  # as if another process bound it after free_port() said it was free
    broker.start()
    try:
        assert broker.remoting_port != taken_port
        with socket.create_connection(("127.0.0.1", broker.remoting_port), timeout=5):
            pass
        broker.restart()  # a restart keeps the ports the clients know
        with socket.create_connection(("127.0.0.1", broker.remoting_port), timeout=5):
            pass
    finally:
        broker.stop()


def test_grpc_harness_retries_a_first_start_on_a_taken_port(tmp_path: Path, taken_port: int) -> None:
    broker = GrpcBroker(tmp_path)
    broker.port = taken_port
    broker.start()
    try:
        assert broker.port != taken_port
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5):
            pass
    finally:
        broker.stop()
