"""``PullConsumer``: the application reads queues from offsets it controls, Kafka-style.

Either ``assign(queues)`` explicitly, or ``subscribe(topic)`` and let the group share the queues
(``allocate_averagely``, recomputed by ``rebalance()``, which ``poll`` calls every
``rebalance_interval_s``). Positions start at the group's committed offset, else at ``consume_from``;
``seek*`` moves them; ``commit()`` stores them on the broker (PULL_MESSAGE and offset codes over remoting,
the PullMessage / GetOffset / UpdateOffset / QueryOffset RPCs over gRPC).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from txmq.client._backoff import ClientStatus
from txmq.client._consume import ConsumeFrom, Subscription
from txmq.client._factory import TransportName, make_transport
from txmq.client._rebalance import allocate_averagely
from txmq.client._registered import RegisteredConsumer
from txmq.client._transport import (
    BEGINNING,
    END,
    ConsumeMode,
    ConsumerInfo,
    OffsetSpec,
    Transport,
    at_timestamp,
)
from txmq.common import errors, limits, names
from txmq.common.message import MessageQueue, MessageView

log = logging.getLogger(__name__)


class PullConsumer(RegisteredConsumer):
    """Offset-based reading with explicit commits.

    ::

        async with PullConsumer("audit", "127.0.0.1:9876") as consumer:
            consumer.assign(await consumer.queues("orders"))
            await consumer.seek_to_beginning()
            while batch := await consumer.poll(timeout_s=1.0):
                handle(batch)
                await consumer.commit()
    """

    def __init__(
        self,
        group: str,
        endpoints: str = "127.0.0.1:9876",
        *,
        transport: TransportName | Transport = "remoting",
        pull_batch_size: int = 32,
        consume_from: ConsumeFrom = ConsumeFrom.LAST_OFFSET,
        consume_timestamp_ms: int = 0,
        rebalance_interval_s: float = 5.0,
        request_timeout_s: float = 3.0,
    ) -> None:
        names.validate_group(group)
        if not 1 <= pull_batch_size <= limits.pull_batch_max:
            raise errors.InvalidArgument(f"pull_batch_size must be in 1..{limits.pull_batch_max}")
        self.group = group
        self.pull_batch_size = pull_batch_size
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self.rebalance_interval_s = rebalance_interval_s
        self.transport = make_transport(endpoints, transport, request_timeout_s=request_timeout_s)
        self._owns_transport = isinstance(transport, str)
        self.subscriptions: dict[str, Subscription] = {}
        self._assigned: list[MessageQueue] = []
        self._manual = False
        self._positions: dict[MessageQueue, int] = {}
        self._next_queue = 0
        self._last_rebalance = 0.0
        self.status = ClientStatus.CREATED

    async def close(self) -> None:
        """Disconnect (positions not committed are lost: call ``commit()`` first)."""
        await super().close()

    def _info(self) -> ConsumerInfo:
        subs = {s.topic: s.expression for s in self.subscriptions.values()}
        return ConsumerInfo(self.group, subs, ConsumeMode.PULL)

    # ---- assignment -------------------------------------------------------------------------------
    async def queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic``."""
        return sorted(
            await self.transport.route(topic, for_write=False), key=lambda q: (q.broker_name, q.queue_id)
        )

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Read exactly these queues (no group rebalancing)."""
        self._manual = True
        self._assigned = list(queues)
        self._positions = {mq: pos for mq, pos in self._positions.items() if mq in self._assigned}

    async def subscribe(self, topic: str, expression: str = "*") -> None:
        """Share ``topic``'s queues with the other members of the group; when it returns, the start
        position of each queue it got is settled (committed offset, else ``consume_from``)."""
        names.validate_topic(topic)
        self._manual = False
        self.subscriptions[topic] = Subscription(topic, expression or "*")
        if self.status is ClientStatus.RUNNING:
            await self.transport.register_consumer(self._info())
        await self.rebalance()

    async def rebalance(self) -> list[MessageQueue]:
        """Recompute this member's share of the subscribed topics' queues; returns it."""
        if self._manual:
            return list(self._assigned)
        mine: list[MessageQueue] = []
        for sub in self.subscriptions.values():
            members = await self.transport.consumer_ids(self.group, sub.topic)
            if self.transport.client_id not in members:
                members = [*members, self.transport.client_id]
            mine += allocate_averagely(self.transport.client_id, members, await self.queues(sub.topic))
        self._assigned = mine
        self._positions = {mq: pos for mq, pos in self._positions.items() if mq in mine}
        # Settle where each new queue starts now, not at its first pull: under LAST_OFFSET a lazy
        # position is the end *at that pull*, so messages sent between subscribe() and the first
        # poll() were skipped.
        await asyncio.gather(*(self._settle(mq) for mq in mine if mq not in self._positions))
        self._last_rebalance = time.monotonic()
        return list(mine)

    async def _settle(self, mq: MessageQueue) -> None:
        """Resolve ``mq``'s position now; when the broker cannot say yet, the first pull retries."""
        try:
            await self.position(mq)
        except errors.TxmqError as exc:
            log.debug("position of %s not resolved yet: %s", mq, exc)

    def assignment(self) -> list[MessageQueue]:
        return list(self._assigned)

    # ---- positions ----------------------------------------------------------------------------------
    async def position(self, mq: MessageQueue) -> int:
        """The next offset ``poll`` reads from ``mq``."""
        if mq not in self._positions:
            committed = await self.transport.query_offset(self.group, mq)
            self._positions[mq] = (
                committed if committed is not None and committed >= 0 else await self._initial(mq)
            )
        return self._positions[mq]

    async def _initial(self, mq: MessageQueue) -> int:
        if self.consume_from is ConsumeFrom.FIRST_OFFSET:
            return await self.transport.resolve_offset(mq, BEGINNING)
        if self.consume_from is ConsumeFrom.TIMESTAMP:
            return await self.transport.resolve_offset(mq, at_timestamp(self.consume_timestamp_ms))
        return await self.transport.resolve_offset(mq, END)

    async def committed(self, mq: MessageQueue) -> int | None:
        return await self.transport.query_offset(self.group, mq)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        if offset < 0:
            raise errors.InvalidOffset(f"offset {offset} is negative")
        self._positions[mq] = offset

    async def _seek_all(self, spec: OffsetSpec, queues: Sequence[MessageQueue] | None) -> None:
        for mq in queues if queues is not None else self._assigned:
            self._positions[mq] = await self.transport.resolve_offset(mq, spec)

    async def seek_to_beginning(self, queues: Sequence[MessageQueue] | None = None) -> None:
        await self._seek_all(BEGINNING, queues)

    async def seek_to_end(self, queues: Sequence[MessageQueue] | None = None) -> None:
        await self._seek_all(END, queues)

    async def seek_to_timestamp(
        self, timestamp_ms: int, queues: Sequence[MessageQueue] | None = None
    ) -> None:
        """Move to the first message stored at or after ``timestamp_ms`` (epoch ms)."""
        await self._seek_all(at_timestamp(timestamp_ms), queues)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Store positions (default: the current ones of every assigned queue) as the group's offsets."""
        for mq, offset in (offsets if offsets is not None else dict(self._positions)).items():
            await self.transport.update_offset(self.group, mq, offset)

    # ---- reading ------------------------------------------------------------------------------------
    async def pull(
        self, mq: MessageQueue, *, max_messages: int | None = None, long_poll_ms: int = 0
    ) -> list[MessageView]:
        """Read the next messages of one queue and advance its position past them."""
        offset = await self.position(mq)
        sub = self.subscriptions.get(mq.topic)
        batch = await self.transport.pull(
            self.group, mq, offset, max_messages=max_messages or self.pull_batch_size,
            expression=sub.expression if sub else "*", long_poll_ms=long_poll_ms,
            max_bytes=limits.pull_bytes_max,
        )  # fmt: skip
        self._positions[mq] = batch.next_offset
        return batch.messages

    async def poll(self, timeout_s: float = 1.0, *, max_messages: int | None = None) -> list[MessageView]:
        """Messages from the next assigned queue that has some; ``[]`` after ``timeout_s``."""
        self._require_running()
        deadline = time.monotonic() + timeout_s
        while True:
            if not self._manual and time.monotonic() - self._last_rebalance > self.rebalance_interval_s:
                await self.rebalance()
            for _ in range(len(self._assigned)):
                mq = self._assigned[self._next_queue % len(self._assigned)]
                self._next_queue += 1
                messages = await self.pull(mq, max_messages=max_messages)
                if messages:
                    return messages
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            await asyncio.sleep(min(0.05, left))

    def _require_running(self) -> None:
        if self.status is not ClientStatus.RUNNING:
            raise errors.ClientClosed("the consumer is not running: call start() or use 'async with'")
