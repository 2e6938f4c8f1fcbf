"""A transactional producer whose connection to the broker goes silent (a dropped route, a half-dead proxy:
bytes vanish both ways, the sockets stay open) right after a local transaction committed: the oneway
END_TRANSACTION is lost, and so is every check-back the broker writes to that connection. The SDK must
leave the silent connection (its next request times out with nothing heard since), reconnect and
register again, so the next transaction goes through and the check-back commits the first one.

Found by the SIGKILL chaos run (seed 15196410): a committed transaction was never visible because the
producer stayed on a black-holed connection for good."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.integration.grpc_harness import BrokerProcess
from txmq.client import LocalTransactionState, Message, MessageView, PullConsumer, TransactionProducer

pytestmark = [pytest.mark.slow]

TOPIC, GROUP = "silent-tx", "silent-tx-producer"


class SilenceableRelay:
    """Forwards each connection to the broker's remoting port; :meth:`silence` turns every connection open
    at that moment into a black hole. Connections made afterwards forward normally."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self._silenced: set[int] = set()
        self._live: set[int] = set()
        self._next = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, port: int) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port, reuse_address=True)

    def silence(self) -> None:
        self._silenced |= self._live

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        index, self._next = self._next, self._next + 1
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.broker.remoting_port)
        except OSError:
            client_w.close()
            return
        self._live.add(index)
        pumps = [
            asyncio.ensure_future(self._pump(index, client_r, up_w)),
            asyncio.ensure_future(self._pump(index, up_r, client_w)),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._live.discard(index)
            for pump in pumps:
                pump.cancel()
            for writer in (client_w, up_w):
                writer.close()

    async def _pump(self, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                if index not in self._silenced:
                    writer.write(data)
                    await writer.drain()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class Ledger:
    """The producer's local database: every transaction commits; the first one silences the network
    just before its COMMIT is sent."""

    def __init__(self, relay: SilenceableRelay, loop: asyncio.AbstractEventLoop) -> None:
        self.relay = relay
        self.loop = loop
        self.committed: set[str] = set()
        self.checked: list[str] = []

    def execute_local_transaction(self, msg: MessageView, arg: Any) -> LocalTransactionState:
        key = msg.body.decode()
        self.committed.add(key)
        if key == "t1":
            self._silence_now()  # before the oneway COMMIT goes out
        return LocalTransactionState.COMMIT_MESSAGE

    def _silence_now(self) -> None:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.relay.silence()
            return
        done = threading.Event()

        def silence() -> None:
            self.relay.silence()
            done.set()

        self.loop.call_soon_threadsafe(silence)
        assert done.wait(10)

    def check_local_transaction(self, msg: MessageView) -> LocalTransactionState:
        key = msg.body.decode()
        self.checked.append(key)
        return (
            LocalTransactionState.COMMIT_MESSAGE
            if key in self.committed
            else LocalTransactionState.ROLLBACK_MESSAGE
        )


async def test_a_silent_connection_is_left_and_the_check_back_commits(tmp_path: Path) -> None:
    relay_port = free_port()
    broker = BrokerProcess(
        tmp_path,
        extra_args=["--transaction-timeout", "500ms", "--transaction-check-interval", "500ms"],
        config={"remoting_advertised_addr": f"127.0.0.1:{relay_port}"},
    )
    relay = SilenceableRelay(broker)
    await relay.start(relay_port)
    await asyncio.to_thread(broker.start)
    ledger = Ledger(relay, asyncio.get_running_loop())
    namesrv = f"127.0.0.1:{broker.namesrv_port}"
    producer = TransactionProducer(GROUP, ledger, namesrv, send_timeout_s=1.0, retries=1)
    try:
        await asyncio.to_thread(broker.admin, "topic.create", {"name": TOPIC, "queues": 1})
        await producer.start()
        await producer.send_message_in_transaction(Message(TOPIC, b"t1"))  # its COMMIT is lost
        # the half send times out on the silent connection; the retry goes out on a new one
        await producer.send_message_in_transaction(Message(TOPIC, b"t2"))
        seen: set[str] = set()
        async with PullConsumer("silent-tx-verdict", namesrv) as consumer:
            consumer.assign(await consumer.queues(TOPIC))
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while seen != {"t1", "t2"} and time.monotonic() < deadline:
                seen |= {m.body.decode() for m in await consumer.poll(timeout_s=0.3)}
        assert seen == {"t1", "t2"}, f"visible: {sorted(seen)}; check-backs answered: {ledger.checked}"
        assert "t1" in ledger.checked  # t1 became visible through a check-back on the new connection
    finally:
        await producer.close()
        await relay.close()
        await asyncio.to_thread(broker.stop)
