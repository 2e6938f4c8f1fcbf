"""Systems by name. Peers are registered here; txmq's own driver is added with :func:`register_driver`.

Factories import their client library only when called, so a missing client breaks only its system.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.harness.driver import Driver

DriverFactory = Callable[[], Driver]


@dataclass(frozen=True)
class SystemEntry:
    name: str
    summary: str
    factory: DriverFactory


_SYSTEMS: dict[str, SystemEntry] = {}


def register_driver(name: str, factory: DriverFactory, summary: str = "") -> None:
    """Make ``name`` selectable by ``txmq bench compare --systems``; a later call replaces it."""
    _SYSTEMS[name] = SystemEntry(name, summary, factory)


def make_driver(name: str) -> Driver:
    try:
        entry = _SYSTEMS[name]
    except KeyError:
        raise KeyError(f"unknown system {name!r}; known: {', '.join(sorted(_SYSTEMS))}") from None
    return entry.factory()


def available_systems() -> dict[str, str]:
    """Registered system names with a one-line summary each."""
    return {name: entry.summary for name, entry in _SYSTEMS.items()}


def _redis(fsync: str) -> DriverFactory:
    def factory() -> Driver:
        from benchmarks.harness.drivers.redis_streams import RedisStreamsDriver

        return RedisStreamsDriver(fsync)

    return factory


def _rabbit(queue_type: str) -> DriverFactory:
    def factory() -> Driver:
        from benchmarks.harness.drivers.rabbitmq import RabbitMQDriver

        return RabbitMQDriver(queue_type)

    return factory


def _nats() -> Driver:
    from benchmarks.harness.drivers.nats_jetstream import NatsJetStreamDriver

    return NatsJetStreamDriver()


register_driver("redis-always", _redis("always"), "Redis Streams, private server, AOF appendfsync always")
register_driver("redis-everysec", _redis("everysec"), "Redis Streams, private server, AOF everysec")
register_driver("rabbitmq-quorum", _rabbit("quorum"), "RabbitMQ durable quorum queue, confirms / tx")
register_driver("rabbitmq-classic", _rabbit("classic"), "RabbitMQ durable classic queue, confirms / tx")
register_driver("nats-file", _nats, "NATS JetStream file storage (no fsync per write)")


def _txmq(flush: str, transport: str) -> DriverFactory:
    def factory() -> Driver:
        from benchmarks.harness.drivers.txmq import TxmqDriver

        return TxmqDriver(flush, transport)  # type: ignore[arg-type]

    return factory


register_driver("txmq-sync", _txmq("sync", "remoting"), "txmq, private broker, flush sync, SDK over remoting")
register_driver("txmq-async", _txmq("async", "remoting"), "txmq, private broker, flush async, SDK, remoting")
register_driver("txmq-grpc", _txmq("sync", "grpc"), "txmq, private broker, flush sync, SDK over gRPC v2")


def _disk() -> Driver:
    from benchmarks.harness.drivers.disk import DiskGroupCommitDriver

    return DiskGroupCommitDriver()


register_driver("disk-groupcommit", _disk, "reference: raw write + fdatasync group commit, no broker")
