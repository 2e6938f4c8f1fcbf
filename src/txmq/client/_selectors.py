"""Queue selection for ordered sends, and splitting big batches (pure functions).

A ``MessageQueueSelector`` is any callable ``(queues, message, arg) -> MessageQueue``: RocketMQ's
``MessageQueueSelector.select`` as a Python callable. Messages for which it picks the same queue are
stored, and consumed by an orderly consumer, in send order.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from txmq.common import errors, limits
from txmq.common.message import Message, MessageQueue

MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]

# What a batch entry costs on the wire besides its body: header, properties, topic (generous).
_ENTRY_OVERHEAD_BYTES = 256


def _stable_hash(arg: Any) -> int:
    if isinstance(arg, int) and not isinstance(arg, bool):
        return abs(arg)
    data = arg if isinstance(arg, bytes) else str(arg).encode("utf-8")
    return zlib.crc32(data)


def select_by_hash(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
    """The queue ``hash(arg) mod len(queues)``, stable across processes (CRC-32 of ``str(arg)``).

    >>> qs = [MessageQueue("t", i) for i in range(4)]
    >>> select_by_hash(qs, Message("t", b"x"), 6).queue_id
    2
    """
    if not queues:
        raise errors.TopicNotFound(f"topic {message.topic} has no writable queue")
    return queues[_stable_hash(arg) % len(queues)]


def entry_bytes(message: Message) -> int:
    properties = message.properties
    if not properties:  # most sends: no generator and sum per message
        return len(message.body) + _ENTRY_OVERHEAD_BYTES
    props = sum(len(k) + len(v) + 2 for k, v in properties.items())
    return len(message.body) + props + _ENTRY_OVERHEAD_BYTES


def split_batches(
    messages: Iterable[Message], max_bytes: int = limits.batch_bytes_max
) -> Iterator[list[Message]]:
    """Cut ``messages`` into consecutive batches of at most ``max_bytes`` (and ``batch_count_max``) each.

    >>> msgs = [Message("t", b"x" * 1000) for _ in range(10)]
    >>> [len(b) for b in split_batches(msgs, max_bytes=3000)]
    [2, 2, 2, 2, 2]
    """
    batch: list[Message] = []
    size = 0
    for message in messages:
        cost = entry_bytes(message)
        if cost > max_bytes:
            raise errors.MessageTooLarge("a batch entry", cost, max_bytes)
        if batch and (size + cost > max_bytes or len(batch) >= limits.batch_count_max):
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += cost
    if batch:
        yield batch
