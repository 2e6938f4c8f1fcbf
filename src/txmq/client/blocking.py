"""Blocking clients for code that runs in threads: the asyncio clients on a private event loop.

Each blocking client owns one event loop in a daemon thread; every call is handed to that loop and waits
for its result, so the semantics (retries, back-off, check-back handling) are exactly the async ones::

    from txmq.client.blocking import BlockingProducer

    with BlockingProducer("127.0.0.1:9876") as producer:
        result = producer.send(Message("orders", b"{}"))
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, Self, TypeVar

from txmq.client._consume import ConsumeFrom
from txmq.client._producer import Producer
from txmq.client._pull import PullConsumer
from txmq.client._transaction import TransactionProducer
from txmq.client.transaction_state import LocalTransactionState, TransactionListener
from txmq.common.message import Message, MessageQueue, MessageView, SendResult

T = TypeVar("T")


class _LoopThread:
    """One event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()


class _Blocking:
    _client: Any

    def __init__(self, name: str) -> None:
        self._loop = _LoopThread(name)

    def start(self) -> None:
        self._loop.run(self._client.start())

    def close(self) -> None:
        try:
            self._loop.run(self._client.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingProducer(_Blocking):
    """:class:`~txmq.client.Producer` for threads; same arguments."""

    def __init__(self, endpoints: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__("txmq-producer")
        self._client = self._loop.run(_make(Producer, endpoints, **options))

    def send(self, message: Message, **options: Any) -> SendResult:
        result: SendResult = self._loop.run(self._client.send(message, **options))
        return result

    def send_oneway(self, message: Message, **options: Any) -> None:
        self._loop.run(self._client.send_oneway(message, **options))

    def send_batch(self, messages: Sequence[Message], **options: Any) -> list[SendResult]:
        results: list[SendResult] = self._loop.run(self._client.send_batch(messages, **options))
        return results


class BlockingTransactionProducer(BlockingProducer):
    """:class:`~txmq.client.TransactionProducer` for threads; same arguments."""

    def __init__(
        self, group: str, listener: TransactionListener, endpoints: str = "127.0.0.1:9876", **options: Any
    ) -> None:
        _Blocking.__init__(self, "txmq-transaction-producer")
        self._client = self._loop.run(_make(TransactionProducer, group, listener, endpoints, **options))

    def send_message_in_transaction(
        self, message: Message, arg: Any = None
    ) -> tuple[SendResult, LocalTransactionState]:
        outcome: tuple[SendResult, LocalTransactionState] = self._loop.run(
            self._client.send_message_in_transaction(message, arg)
        )
        return outcome


class BlockingPullConsumer(_Blocking):
    """:class:`~txmq.client.PullConsumer` for threads; same arguments."""

    def __init__(self, group: str, endpoints: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__("txmq-pull-consumer")
        self._client = self._loop.run(_make(PullConsumer, group, endpoints, **options))

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._loop.run(self._client.subscribe(topic, expression))

    def poll(self, timeout_s: float = 1.0) -> list[MessageView]:
        messages: list[MessageView] = self._loop.run(self._client.poll(timeout_s=timeout_s))
        return messages

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._loop.run(self._client.commit(offsets))


async def _make(cls: Any, *args: Any, **options: Any) -> Any:
    """Construct an asyncio client on its own loop (clients may bind loop objects at construction)."""
    return cls(*args, **options)


__all__ = ["BlockingProducer", "BlockingPullConsumer", "BlockingTransactionProducer", "ConsumeFrom"]
