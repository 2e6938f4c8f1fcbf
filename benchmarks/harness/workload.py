"""Workloads shaped like the OpenMessaging Benchmark's, plus the standard set from issue 8."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """One benchmark scenario. Rates and sizes are per message; a *request* carries ``batch`` messages.

    ``in_flight`` is the number of requests each producer keeps outstanding. ``target_rate`` is the
    total message rate over all producers (``None`` = as fast as acknowledgements allow).
    ``preload_messages`` > 0 makes this a consume workload: that many messages are stored first
    (untimed), then consumers drain them in batches of ``consume_batch`` and only the drain is measured.
    ``durability`` labels what the scenario asks of the system ("fsync" = durable before the ack,
    "async" = flushed in the background); every driver states what it actually does in ``describe()``.
    """

    name: str
    topics: int = 1
    queues: int = 1
    message_bytes: int = 1024
    producers: int = 1
    in_flight: int = 1
    batch: int = 1
    target_rate: float | None = None
    duration_s: float = 3.0
    warmup_s: float = 0.0
    consumers: int = 0
    consume_batch: int = 256
    preload_messages: int = 0
    transactional: bool = False
    durability: str = "fsync"

    def __post_init__(self) -> None:
        if self.topics != 1:
            raise ValueError("only one topic per workload is supported")
        if self.queues < 1 or self.producers < 1 or self.in_flight < 1 or self.batch < 1:
            raise ValueError("queues, producers, in_flight and batch must be >= 1")
        if self.message_bytes < 16:
            raise ValueError("message_bytes must be >= 16 (the payload carries a timestamp)")
        if self.preload_messages and self.consumers < 1:
            raise ValueError("a consume workload (preload_messages > 0) needs consumers >= 1")
        if self.target_rate is not None and self.target_rate <= 0:
            raise ValueError("target_rate must be positive or None")

    @property
    def is_consume(self) -> bool:
        return self.preload_messages > 0

    def scaled(self, *, duration_s: float | None = None, preload_messages: int | None = None) -> Workload:
        """A copy with a different length: the CLI and the smoke test shrink the standard workloads."""
        changes: dict[str, object] = {}
        if duration_s is not None:
            changes["duration_s"] = duration_s
            changes["warmup_s"] = min(self.warmup_s, duration_s / 4)
        if preload_messages is not None and self.is_consume:
            changes["preload_messages"] = preload_messages
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _standard() -> dict[str, Workload]:
    """Issue 8's table, 1 KB messages, one topic."""
    items = [
        Workload("batch-100", batch=100, in_flight=1, warmup_s=0.5),
        Workload("single-1", warmup_s=0.5),
        Workload("async-256", in_flight=256, durability="async", warmup_s=0.5),
        Workload("tx-8", producers=8, transactional=True, warmup_s=0.5),
        Workload("e2e-500", target_rate=500.0, consumers=1, warmup_s=0.5),
        Workload("consume-256", consumers=1, consume_batch=256, preload_messages=20_000),
        Workload("batch-100-q16", queues=16, batch=100, in_flight=4, warmup_s=0.5),
    ]
    return {w.name: w for w in items}


STANDARD_WORKLOADS: dict[str, Workload] = _standard()
