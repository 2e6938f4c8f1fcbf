"""The start/close lifecycle of a consumer the broker knows by its group (pull and simple consumers).

``start`` connects the transport and registers the group's subscriptions (the broker's consumer list
and rebalancing see it from then on); ``close`` unregisters and closes the transport if the consumer
made it itself. Both are idempotent; ``async with`` does the two.
"""

from __future__ import annotations

from typing import Self

from txmq.client._backoff import ClientStatus
from txmq.client._transport import ConsumerInfo, Transport


class RegisteredConsumer:
    group: str
    transport: Transport
    _owns_transport: bool
    status: ClientStatus

    def _info(self) -> ConsumerInfo:
        raise NotImplementedError

    async def start(self) -> None:
        if self.status is ClientStatus.RUNNING:
            return
        await self.transport.start()
        await self.transport.register_consumer(self._info())
        self.status = ClientStatus.RUNNING

    async def close(self) -> None:
        if self.status is not ClientStatus.RUNNING:
            return
        self.status = ClientStatus.CLOSED
        await self.transport.unregister_consumer(self.group)
        if self._owns_transport:
            await self.transport.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
