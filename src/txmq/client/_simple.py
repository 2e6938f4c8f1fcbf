"""``SimpleConsumer``: receive, process, ack (RocketMQ 5's POP model), over gRPC.

``receive`` returns up to ``max_messages`` messages, each invisible to the group for
``invisible_duration_s``; ``ack`` finishes one; ``change_invisible_duration`` extends (or shortens) its
invisibility and returns the message with its new receipt handle. An unacked message is delivered
again when its invisibility ends, with ``delivery_attempt`` + 1, and goes to ``%DLQ%<group>`` after the
broker's maximum attempts. Over remoting txmq has no POP codes: the calls raise ``Unsupported``.
"""

from __future__ import annotations

from txmq.client._backoff import ClientStatus
from txmq.client._factory import TransportName, make_transport
from txmq.client._registered import RegisteredConsumer
from txmq.client._transport import ConsumeMode, ConsumerInfo, Transport
from txmq.common import errors, limits, names
from txmq.common.message import MessageView


class SimpleConsumer(RegisteredConsumer):
    """::

    async with SimpleConsumer("audit", "127.0.0.1:8081", transport="grpc") as consumer:
        consumer.subscribe("orders")
        for msg in await consumer.receive(max_messages=16, invisible_duration_s=30):
            handle(msg)
            await consumer.ack(msg)
    """

    def __init__(
        self,
        group: str,
        endpoints: str = "127.0.0.1:8081",
        *,
        transport: TransportName | Transport = "grpc",
        subscriptions: dict[str, str] | None = None,
        wait_s: float = 5.0,
        request_timeout_s: float = 3.0,
    ) -> None:
        names.validate_group(group)
        self.group = group
        self.wait_s = wait_s
        self.subscriptions: dict[str, str] = dict(subscriptions or {})
        self.transport = make_transport(endpoints, transport, request_timeout_s=request_timeout_s)
        self._owns_transport = isinstance(transport, str)
        self._next = 0
        self.status = ClientStatus.CREATED

    def _info(self) -> ConsumerInfo:
        return ConsumerInfo(self.group, dict(self.subscriptions), ConsumeMode.POP)

    async def subscribe(self, topic: str, expression: str = "*") -> None:
        names.validate_topic(topic)
        self.subscriptions[topic] = expression or "*"
        if self.status is ClientStatus.RUNNING:
            await self.transport.register_consumer(self._info())

    async def receive(
        self, max_messages: int = 16, invisible_duration_s: float = 30.0, *, wait_s: float | None = None
    ) -> list[MessageView]:
        """Up to ``max_messages`` messages of the subscribed topics (round robin); ``[]`` after ``wait_s``."""
        if self.status is not ClientStatus.RUNNING:
            raise errors.ClientClosed("the consumer is not running")
        if not self.subscriptions:
            raise errors.InvalidArgument("subscribe to a topic first")
        if not 1 <= max_messages <= limits.receive_batch_max:
            raise errors.InvalidArgument(f"max_messages must be in 1..{limits.receive_batch_max}")
        topics = sorted(self.subscriptions)
        topic = topics[self._next % len(topics)]
        self._next += 1
        return await self.transport.receive(
            self.group, topic, self.subscriptions[topic], max_messages=max_messages,
            invisible_ms=round(invisible_duration_s * 1000),
            wait_ms=round((self.wait_s if wait_s is None else wait_s) * 1000),
        )  # fmt: skip

    async def ack(self, message: MessageView) -> None:
        """Finish ``message``: it is not delivered again."""
        await self.transport.ack(self.group, message)

    async def change_invisible_duration(
        self, message: MessageView, invisible_duration_s: float
    ) -> MessageView:
        """Keep ``message`` invisible ``invisible_duration_s`` from now; use the returned copy to ack it."""
        return await self.transport.change_invisible_duration(
            self.group, message, round(invisible_duration_s * 1000)
        )
