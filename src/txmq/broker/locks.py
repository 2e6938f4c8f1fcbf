"""Queue locks for orderly 4.x consumers (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

An orderly consumer locks a queue before it consumes it, so two clients of one group never consume the
same queue at once across a rebalance. A lock is a lease: it belongs to one client id and lapses
``lease_ms`` after the last renewal (4.x clients renew every 20 s; the broker's lease is 60 s).
Pure bookkeeping with an injected clock; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from txmq.common.clock import Clock

LOCK_LEASE_MS_DEFAULT = 60_000

QueueKey = tuple[str, str, int]  # (group, topic, queue id)


@dataclass(slots=True)
class _Lease:
    client_id: str
    expires_ms: int


class QueueLocks:
    """One owner per (group, topic, queue) at a time; an expired lease can be taken by anyone."""

    def __init__(self, clock: Clock, *, lease_ms: int = LOCK_LEASE_MS_DEFAULT) -> None:
        self._clock = clock
        self._lease_ms = lease_ms
        self._leases: dict[QueueKey, _Lease] = {}

    def try_lock(
        self, group: str, client_id: str, queues: Iterable[tuple[str, int]]
    ) -> list[tuple[str, int]]:
        """Lock (or renew) every queue that is free, expired or already ours; returns those held now."""
        now = self._clock.now_ms()
        held: list[tuple[str, int]] = []
        for topic, queue_id in queues:
            key = (group, topic, queue_id)
            lease = self._leases.get(key)
            if lease is None or lease.client_id == client_id or lease.expires_ms <= now:
                self._leases[key] = _Lease(client_id, now + self._lease_ms)
                held.append((topic, queue_id))
        return held

    def unlock(self, group: str, client_id: str, queues: Iterable[tuple[str, int]]) -> None:
        """Release the queues this client holds; another client's locks are left alone."""
        for topic, queue_id in queues:
            key = (group, topic, queue_id)
            lease = self._leases.get(key)
            if lease is not None and lease.client_id == client_id:
                del self._leases[key]

    def owner(self, group: str, topic: str, queue_id: int) -> str | None:
        lease = self._leases.get((group, topic, queue_id))
        if lease is None or lease.expires_ms <= self._clock.now_ms():
            return None
        return lease.client_id

    def release_client(self, client_id: str) -> None:
        """Drop every lock of a client that went away."""
        for key in [k for k, v in self._leases.items() if v.client_id == client_id]:
            del self._leases[key]
