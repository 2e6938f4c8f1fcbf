"""The ``Transport`` protocol: every network operation the SDK's producers and consumers need.

Two implementations speak it: ``RemotingTransport`` (RocketMQ's TCP protocol through a name server,
the default and fast path) and ``GrpcTransport`` (``apache.rocketmq.v2`` to a proxy endpoint). Producers
and consumers are written once against this protocol; a feature one wire protocol cannot express
raises ``Unsupported`` there (see ``supports``).

Registration is declarative: the client tells the transport which producer groups and consumer
groups it runs (``register_producer`` / ``register_consumer``); the transport keeps the broker told
(heartbeats, Telemetry settings) and replays the registrations after every reconnect.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from txmq.common.fastinit import slot_init
from txmq.common.message import Message, MessageQueue, MessageView, SendResult


class Feature(enum.Enum):
    """Capabilities that differ between the two wire protocols."""

    POP = "pop"  # receive / ack / change invisible duration (SimpleConsumer, gRPC PushConsumer)
    PULL = "pull"  # offset-based reads (PullConsumer, remoting PushConsumer)
    QUEUE_LOCKS = "queue_locks"  # LOCK_BATCH_MQ for orderly consumers
    SEND_BACK = "send_back"  # CONSUMER_SEND_MSG_BACK redelivery
    BATCH_SEND = "batch_send"  # one atomic request for many messages
    DELIVERY_TIMESTAMP = "delivery_timestamp"  # arbitrary delivery time (5.x DELAY)
    ONEWAY = "oneway"  # sends without an answer (over gRPC: a send whose answer is ignored)
    QUEUE_SELECTION = "queue_selection"  # the client picks the queue of a send (selectors)


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MESSAGE = "NO_NEW_MESSAGE"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"  # all filtered out; continue from next_offset
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  # the offset is outside [min, max]; continue from next_offset


@dataclass(frozen=True, slots=True)
class PullBatch:
    status: PullStatus
    messages: list[MessageView]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class RawPullBatch:
    """A remoting pull's answer with its body undecoded (``b""`` unless ``FOUND``)."""

    status: PullStatus
    body: bytes
    next_offset: int
    min_offset: int
    max_offset: int


class ConsumeMode(enum.Enum):
    PUSH = "CONSUME_PASSIVELY"
    PULL = "CONSUME_ACTIVELY"
    POP = "CONSUME_POP"


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    """A consumer group this client runs: what it subscribes (topic -> tag expression) and how."""

    group: str
    subscriptions: Mapping[str, str]
    mode: ConsumeMode = ConsumeMode.PUSH
    fifo: bool = False
    max_attempts: int = 17


@slot_init  # one is built per transaction's END_TRANSACTION
@dataclass(frozen=True, slots=True)
class TransactionRef:
    """What ``end_transaction`` needs to name a half message, on either protocol."""

    topic: str
    message_id: str  # the client message id (UNIQ_KEY)
    transaction_id: str
    commit_log_offset: int = -1
    queue_offset: int = 0
    offset_message_id: str | None = None
    # which broker holds the half: its decision must go there, not to any broker of the topic (with
    # several brokers the others do not know it); the name from the send, the address from a check
    broker_name: str | None = None
    broker_addr: str | None = None


@dataclass(frozen=True, slots=True)
class CheckRequest:
    """The broker asks a producer group how a half message's local transaction ended."""

    producer_group: str
    message: MessageView  # the half message; ``message.transaction_id`` is set
    ref: TransactionRef


CheckHandler = Callable[[CheckRequest], Awaitable[None]]
OnReconnect = Callable[[], Awaitable[None]]
SendDone = Callable[[SendResult | None, BaseException | None], None]


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where to start reading a queue: ``BEGINNING``, ``END`` or the first message at ``timestamp_ms``."""

    kind: str  # "beginning" | "end" | "timestamp"
    timestamp_ms: int = 0


BEGINNING = OffsetSpec("beginning")
END = OffsetSpec("end")


def at_timestamp(timestamp_ms: int) -> OffsetSpec:
    return OffsetSpec("timestamp", timestamp_ms)


@dataclass(slots=True)
class Registrations:
    """What a transport replays after a reconnect."""

    producer_groups: set[str] = field(default_factory=set)
    consumers: dict[str, ConsumerInfo] = field(default_factory=dict)


class Transport(Protocol):
    """One client's connection to a txmq (or RocketMQ) cluster; see the module docstring."""

    name: str
    client_id: str

    def supports(self, feature: Feature) -> bool: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    # ---- registration -----------------------------------------------------------------------
    async def register_producer(self, group: str, topics: Sequence[str] = ()) -> None: ...

    async def unregister_producer(self, group: str) -> None: ...

    async def register_consumer(self, info: ConsumerInfo) -> None: ...

    async def unregister_consumer(self, group: str) -> None: ...

    def set_check_handler(self, handler: CheckHandler | None) -> None: ...

    def on_reconnect(self, hook: OnReconnect) -> None: ...

    # ---- routes -----------------------------------------------------------------------------
    async def route(self, topic: str, *, for_write: bool) -> list[MessageQueue]: ...

    def invalidate_route(self, topic: str) -> None: ...

    async def topic_exists(self, topic: str) -> bool:
        """Whether ``topic`` exists, asked without creating it (a route lookup may auto-create it)."""
        ...

    # ---- producing --------------------------------------------------------------------------
    async def send(
        self, mq: MessageQueue | None, messages: Sequence[Message], *, producer_group: str, timeout_s: float
    ) -> list[SendResult]: ...

    def cached_write_queues(self, topic: str) -> Sequence[MessageQueue] | None:
        """The writable queues of ``topic`` if known and fresh, without I/O (else None: use ``route``)."""
        ...

    def start_send(
        self, mq: MessageQueue, message: Message, *, producer_group: str, timeout_s: float, done: SendDone
    ) -> bool:
        """Start one attempt of ``send(mq, [message])`` without I/O to wait for, and call ``done(result,
        None)`` or ``done(None, error)`` when it ends; False (and no call) when that cannot be done now
        (no open connection yet): then ``send`` is the way."""
        ...

    async def send_oneway(
        self, mq: MessageQueue | None, message: Message, *, producer_group: str
    ) -> None: ...

    def start_end_transaction(
        self, ref: TransactionRef, *, producer_group: str, commit: bool | None, from_check: bool
    ) -> bool:
        """Start ``end_transaction`` (its oneway form) without I/O to wait for; False (nothing sent) when
        that cannot be done now (no cached route or open connection): then ``end_transaction``."""
        ...

    async def end_transaction(
        self, ref: TransactionRef, *, producer_group: str, commit: bool | None, from_check: bool
    ) -> None: ...

    # ---- offset-based consuming ---------------------------------------------------------------
    async def pull(
        self,
        group: str,
        mq: MessageQueue,
        offset: int,
        *,
        max_messages: int,
        expression: str,
        long_poll_ms: int,
        max_bytes: int,
    ) -> PullBatch: ...

    async def query_offset(self, group: str, mq: MessageQueue) -> int | None: ...

    async def update_offset(self, group: str, mq: MessageQueue, offset: int) -> None: ...

    async def resolve_offset(self, mq: MessageQueue, spec: OffsetSpec) -> int: ...

    async def send_back(
        self, group: str, message: MessageView, *, delay_level: int, max_reconsume_times: int
    ) -> None: ...

    async def consumer_ids(self, group: str, topic: str) -> list[str]: ...

    async def lock_queues(self, group: str, mqs: Sequence[MessageQueue]) -> set[MessageQueue]: ...

    async def unlock_queues(self, group: str, mqs: Sequence[MessageQueue]) -> None: ...

    # ---- POP consuming ------------------------------------------------------------------------
    async def receive(
        self,
        group: str,
        topic: str,
        expression: str,
        *,
        max_messages: int,
        invisible_ms: int,
        wait_ms: int,
    ) -> list[MessageView]: ...

    async def ack(self, group: str, message: MessageView) -> None: ...

    async def change_invisible_duration(
        self, group: str, message: MessageView, invisible_ms: int
    ) -> MessageView: ...
