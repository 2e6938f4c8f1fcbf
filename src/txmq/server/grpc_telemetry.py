"""The Telemetry stream: settings handshake, and the client's only server-to-client channel.

A :class:`TelemetryChannel` is what the broker's client registry holds for a gRPC client
(:class:`txmq.broker.clients.ClientChannel`): a transaction check-back becomes a
``RecoverOrphanedTransactionCommand`` queued onto the stream, answered later by the client with a unary
``EndTransaction(SOURCE_SERVER_CHECK)``.

Group policy choice: a consumer group is FIFO when any topic it subscribes is a FIFO topic
(``TopicMessageType.FIFO``). RocketMQ keeps the flag on the subscription group; a 5.x client never sends
it (the server tells it in this reply), so deriving it from the topic is what makes FIFO topics behave
as FIFO for official clients without an extra admin step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.common.message import MessageView, TopicMessageType
from txmq.protocol.grpc import convert, pb, settings
from txmq.protocol.grpc.status import status_of

log = logging.getLogger(__name__)

_KINDS = {
    pb.ClientType.PRODUCER: ClientKind.PRODUCER,
    pb.ClientType.PUSH_CONSUMER: ClientKind.PUSH_CONSUMER,
    pb.ClientType.SIMPLE_CONSUMER: ClientKind.SIMPLE_CONSUMER,
    pb.ClientType.PULL_CONSUMER: ClientKind.PULL_CONSUMER,
}


def client_kind(client_type: int) -> ClientKind:
    return _KINDS.get(client_type, ClientKind.OTHER)


class TelemetryChannel:
    """Commands waiting to be written to one client's Telemetry stream."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._open = True

    def is_open(self) -> bool:
        return self._open

    def push(self, command: Any) -> bool:
        if not self._open:
            return False
        self._queue.put_nowait(command)
        return True

    def send_check(self, message: MessageView, transaction_id: str) -> bool:
        command = pb.service.TelemetryCommand()
        command.recover_orphaned_transaction_command.message.CopyFrom(convert.to_wire(message))
        command.recover_orphaned_transaction_command.transaction_id = transaction_id
        return self.push(command)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._queue.put_nowait(None)

    async def commands(self) -> AsyncIterator[Any]:
        while True:
            command = await self._queue.get()
            if command is None:
                return
            yield command


def on_settings(broker: Broker, client_id: str, channel: TelemetryChannel, client: Any) -> Any:
    """Register the client and build the settings reply command."""
    kind = client_kind(client.client_type)
    reply = pb.service.TelemetryCommand(status=convert.OK_STATUS)
    if kind is ClientKind.PRODUCER:
        topics = set(settings.published_topics(client))
        broker.clients.touch(
            client_id, kind=kind, groups=topics, topics=topics, channel=channel, protocol="grpc"
        )
        reply.settings.CopyFrom(settings.producer_reply(client))
        return reply
    group = client.subscription.group.name
    topics = set(settings.subscribed_topics(client))
    broker.clients.touch(
        client_id,
        kind=kind,
        groups={group} if group else None,
        topics=topics,
        channel=channel,
        protocol="grpc",
    )
    fifo = False
    for name in topics:
        config = broker.topics.get(name)
        if config is not None and config.message_type is TopicMessageType.FIFO:
            fifo = True
    max_attempts = broker.config.max_delivery_attempts
    if group:
        broker.set_group_policy(group, max_attempts=max_attempts, fifo=fifo)
    reply.settings.CopyFrom(
        settings.consumer_reply(
            client, max_attempts=max_attempts, fifo=fifo, backoff_ms=broker.config.retry_backoff_ms
        )
    )
    return reply


async def read_commands(broker: Broker, client_id: str, channel: TelemetryChannel, requests: Any) -> None:
    """Answer each settings command; other commands (replies to commands txmq never sends) are ignored."""
    try:
        async for command in requests:
            if command.HasField("settings"):
                try:
                    reply = on_settings(broker, client_id, channel, command.settings)
                except Exception as exc:  # noqa: BLE001 - every failure becomes a v2 status
                    reply = pb.service.TelemetryCommand(status=status_of(exc))
                channel.push(reply)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.debug("telemetry stream of %s ended with an error", client_id, exc_info=True)
    finally:
        channel.close()
