"""Blocking clients for code that runs in threads: the asyncio clients on a private event loop.

Each blocking client owns one event loop in a daemon thread; every call is handed to that loop and waits
for its result, so the semantics (retries, back-off, check-back handling) are exactly the async ones::

    from txmq.client.blocking import BlockingProducer

    with BlockingProducer("127.0.0.1:9876") as producer:
        result = producer.send(Message("orders", b"{}"))
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Self, TypeVar

from txmq.client._consume import ConsumeFrom
from txmq.client._producer import Producer
from txmq.client._pull import PullConsumer
from txmq.client._push import PushConsumer
from txmq.client._simple import SimpleConsumer
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
        return self.submit(coroutine).result(timeout_s)

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

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

    def send_async(self, message: Message, **options: Any) -> concurrent.futures.Future[SendResult]:
        """Return at once; the future completes with the ``SendResult`` (or the error)."""
        future: concurrent.futures.Future[SendResult] = self._loop.submit(
            self._client.send(message, **options)
        )
        return future

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
    """:class:`~txmq.client.PullConsumer` for threads; same arguments and the same calls."""

    def __init__(self, group: str, endpoints: str = "127.0.0.1:9876", **options: Any) -> None:
        super().__init__("txmq-pull-consumer")
        self._client = self._loop.run(_make(PullConsumer, group, endpoints, **options))

    def queues(self, topic: str) -> list[MessageQueue]:
        found: list[MessageQueue] = self._loop.run(self._client.queues(topic))
        return found

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        self._loop.run(_call(self._client.assign, list(queues)))

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._loop.run(self._client.subscribe(topic, expression))

    def rebalance(self) -> list[MessageQueue]:
        mine: list[MessageQueue] = self._loop.run(self._client.rebalance())
        return mine

    def assignment(self) -> list[MessageQueue]:
        assigned: list[MessageQueue] = self._loop.run(_call(self._client.assignment))
        return assigned

    def position(self, mq: MessageQueue) -> int:
        offset: int = self._loop.run(self._client.position(mq))
        return offset

    def committed(self, mq: MessageQueue) -> int | None:
        offset: int | None = self._loop.run(self._client.committed(mq))
        return offset

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._loop.run(_call(self._client.seek, mq, offset))

    def seek_to_beginning(self, queues: Sequence[MessageQueue] | None = None) -> None:
        self._loop.run(self._client.seek_to_beginning(queues))

    def seek_to_end(self, queues: Sequence[MessageQueue] | None = None) -> None:
        self._loop.run(self._client.seek_to_end(queues))

    def seek_to_timestamp(self, timestamp_ms: int, queues: Sequence[MessageQueue] | None = None) -> None:
        self._loop.run(self._client.seek_to_timestamp(timestamp_ms, queues))

    def pull(
        self, mq: MessageQueue, *, max_messages: int | None = None, long_poll_ms: int = 0
    ) -> list[MessageView]:
        messages: list[MessageView] = self._loop.run(
            self._client.pull(mq, max_messages=max_messages, long_poll_ms=long_poll_ms)
        )
        return messages

    def poll(self, timeout_s: float = 1.0, *, max_messages: int | None = None) -> list[MessageView]:
        messages: list[MessageView] = self._loop.run(
            self._client.poll(timeout_s=timeout_s, max_messages=max_messages)
        )
        return messages

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._loop.run(self._client.commit(offsets))


class BlockingPushConsumer(_Blocking):
    """:class:`~txmq.client.PushConsumer` for threads; same arguments. A plain-function listener runs
    in the consumer's worker threads, never on the caller's thread::

        with BlockingPushConsumer("billing", "127.0.0.1:9876", listener=on_messages,
                                  subscriptions={"orders": "*"}) as consumer:
            stop.wait()
    """

    def __init__(
        self,
        group: str,
        endpoints: str = "127.0.0.1:9876",
        *,
        subscriptions: dict[str, str] | None = None,
        **options: Any,
    ) -> None:
        super().__init__("txmq-push-consumer")
        self._client = self._loop.run(_make(PushConsumer, group, endpoints, **options))
        for topic, expression in (subscriptions or {}).items():
            self.subscribe(topic, expression)

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Subscribe before ``start()`` (or entering the ``with`` block)."""
        self._client.subscribe(topic, expression)

    def register_listener(self, listener: Any) -> None:
        """Set the listener before ``start()`` (or entering the ``with`` block)."""
        self._client.register_listener(listener)

    def rebalance(self) -> None:
        self._loop.run(self._client.rebalance())

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        assigned: list[MessageQueue] = self._loop.run(_call(lambda: self._client.assigned_queues))
        return assigned


class BlockingSimpleConsumer(_Blocking):
    """:class:`~txmq.client.SimpleConsumer` for threads (gRPC transport); same arguments::

    with BlockingSimpleConsumer("audit", "127.0.0.1:8081", subscriptions={"orders": "*"}) as c:
        for msg in c.receive(16, invisible_duration_s=30):
            c.ack(msg)
    """

    def __init__(self, group: str, endpoints: str = "127.0.0.1:8081", **options: Any) -> None:
        super().__init__("txmq-simple-consumer")
        self._client = self._loop.run(_make(SimpleConsumer, group, endpoints, **options))

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._loop.run(self._client.subscribe(topic, expression))

    def receive(
        self, max_messages: int = 16, invisible_duration_s: float = 30.0, *, wait_s: float | None = None
    ) -> list[MessageView]:
        messages: list[MessageView] = self._loop.run(
            self._client.receive(max_messages, invisible_duration_s, wait_s=wait_s)
        )
        return messages

    def ack(self, message: MessageView) -> None:
        self._loop.run(self._client.ack(message))

    def change_invisible_duration(self, message: MessageView, invisible_duration_s: float) -> MessageView:
        renewed: MessageView = self._loop.run(
            self._client.change_invisible_duration(message, invisible_duration_s)
        )
        return renewed


async def _call(fn: Callable[..., T], *args: Any) -> T:
    """Run a plain method of a client on its loop's thread (the client's state belongs to that thread)."""
    return fn(*args)


async def _make(cls: Any, *args: Any, **options: Any) -> Any:
    """Construct an asyncio client on its own loop (clients may bind loop objects at construction)."""
    return cls(*args, **options)


__all__ = [
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BlockingSimpleConsumer",
    "BlockingTransactionProducer",
    "ConsumeFrom",
]
