"""txmq's Python SDK: producers (plain and transactional) and consumers (push, pull, simple).

Asyncio first; ``txmq.client.blocking`` wraps the same clients for threads. Two transports: the
RocketMQ remoting protocol through a name server (default, ``"host:9876"``) and the v2 gRPC protocol
(``transport="grpc"``, ``"host:8081"``). Everything listed in ``__all__`` is public and stable.
"""

from typing import TYPE_CHECKING

from txmq.client._backoff import Backoff, ClientStatus
from txmq.client._consume import ConsumeFrom, ConsumeResult, MessageListener
from txmq.client._producer import Producer
from txmq.client._pull import PullConsumer
from txmq.client._push import PushConsumer
from txmq.client._rebalance import allocate_averagely
from txmq.client._selectors import MessageQueueSelector, select_by_hash, split_batches
from txmq.client._simple import SimpleConsumer
from txmq.client._transaction import Transaction, TransactionProducer
from txmq.client._transport import Feature, Transport
from txmq.client.blocking import (
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingSimpleConsumer,
    BlockingTransactionProducer,
)
from txmq.client.transaction_state import LocalTransactionState, TransactionListener
from txmq.common.errors import (
    ClientClosed,
    ConnectionError_,
    SendTimeout,
    TxmqError,
    Unsupported,
)
from txmq.common.message import Message, MessageQueue, MessageView, SendResult

if TYPE_CHECKING:
    from txmq.client.idempotency import Deduplicator


def __getattr__(name: str) -> object:
    """``Deduplicator`` is loaded on first use: it needs SQLAlchemy, which costs most of the import time."""
    if name == "Deduplicator":
        from txmq.client.idempotency import Deduplicator

        return Deduplicator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Backoff",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "BlockingSimpleConsumer",
    "BlockingTransactionProducer",
    "ClientClosed",
    "ClientStatus",
    "ConnectionError_",
    "ConsumeFrom",
    "ConsumeResult",
    "Deduplicator",
    "Feature",
    "LocalTransactionState",
    "Message",
    "MessageListener",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageView",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "SendResult",
    "SendTimeout",
    "SimpleConsumer",
    "Transaction",
    "TransactionListener",
    "TransactionProducer",
    "Transport",
    "TxmqError",
    "Unsupported",
    "allocate_averagely",
    "select_by_hash",
    "split_batches",
]
