"""Fixtures shared by the official-client tests: the client package, a broker, and clients on it.

A module that needs broker flags defines its own ``broker`` fixture; ``clients`` then connects to that
one (the remoting modules' ``broker`` fixtures are other kinds and never meet ``clients``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .grpc_harness import BrokerProcess, Clients, official_client


@pytest.fixture(scope="module")
def rmq(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return official_client(tmp_path_factory.mktemp("client-home"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("broker"))
    process.start()
    yield process
    process.stop()


@pytest.fixture
def clients(rmq: Any, broker: BrokerProcess) -> Iterator[Clients]:
    made = Clients(rmq, broker.endpoint)
    yield made
    made.close()
