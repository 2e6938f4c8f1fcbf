"""Receipt handles: opaque strings a consumer echoes to ack or change the invisible time of a message.

A handle names the queue position it was issued for and a nonce; a handle is valid only while the
broker's in-flight entry carries the same nonce, so an old handle (after a change of invisible time, a
redelivery or an ack) is rejected with ``INVALID_RECEIPT_HANDLE``.
"""

from __future__ import annotations

from dataclasses import dataclass

from txmq.common import errors
from txmq.common.fastinit import slot_init

_VERSION = "t1"


@slot_init  # one is decoded per ack
@dataclass(frozen=True, slots=True)
class Receipt:
    topic: str
    queue_id: int
    queue_offset: int
    nonce: int
    deadline_ms: int

    def encode(self) -> str:
        return encode_receipt(self.topic, self.queue_id, self.queue_offset, self.nonce, self.deadline_ms)


def encode_receipt(topic: str, queue_id: int, queue_offset: int, nonce: int, deadline_ms: int) -> str:
    """``Receipt(...).encode()`` without building the Receipt (one per delivered message)."""
    return f"{_VERSION}|{topic}|{queue_id}|{queue_offset}|{nonce}|{deadline_ms}"


def decode_receipt(handle: str) -> Receipt:
    parts = handle.split("|")
    if len(parts) != 6 or parts[0] != _VERSION:
        raise errors.InvalidReceiptHandle(f"malformed receipt handle {handle[:80]!r}")
    try:
        return Receipt(parts[1], int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5]))
    except ValueError:
        raise errors.InvalidReceiptHandle(f"malformed receipt handle {handle[:80]!r}") from None
