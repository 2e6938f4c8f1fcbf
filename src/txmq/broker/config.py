"""Broker configuration: one frozen dataclass, validated once, built from CLI flags or a config file."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from txmq.common import errors, limits
from txmq.common.durations import parse_duration_ms
from txmq.storage.api import FlushMode

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


class TlsMode(enum.Enum):
    """What the gRPC port accepts (``grpc_tls``)."""

    OFF = "off"  # plaintext (h2c) only
    PERMISSIVE = "permissive"  # TLS and plaintext on the same port (the Apache proxy's default)
    ON = "on"  # TLS only

    @classmethod
    def parse(cls, text: str) -> TlsMode:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise errors.InvalidArgument(
                f"grpc TLS mode must be off, permissive or on, not {text!r}"
            ) from None


def check_key_pair_given(cert_file: str, key_file: str) -> None:
    """Both or neither: a half-configured TLS must not fall back silently to a self-signed pair."""
    if bool(cert_file) != bool(key_file):
        raise errors.InvalidArgument("give both --tls-cert and --tls-key, or neither (a self-signed pair)")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    data_dir: str = "./txmq-data"
    host: str = "127.0.0.1"
    grpc_port: int = 8081
    # TLS on the gRPC port: "permissive" takes TLS and plaintext clients on the one port (RocketMQ 5's
    # Java client uses TLS by default; Python and Node use plaintext), "on" TLS only, "off" plaintext
    # only. Without tls_cert_file/tls_key_file the broker makes a self-signed pair under data_dir/tls.
    grpc_tls: str = "permissive"
    tls_cert_file: str = ""
    tls_key_file: str = ""
    remoting_port: int = 10911
    # The remoting address routes name (RocketMQ's brokerIP1): set it when clients reach the broker
    # through a NAT, a load balancer or a fault proxy; None: the bound host:port.
    remoting_advertised_addr: str | None = None
    namesrv_port: int = 9876
    namesrv_addr: str | None = None  # register with an external name server instead of the embedded one
    run_namesrv: bool = True
    broker_name: str = "broker-a"
    cluster_name: str = "DefaultCluster"
    flush: FlushMode = FlushMode.SYNC
    flush_interval_ms: int = 500
    segment_bytes: int = limits.segment_bytes_default
    prealloc_bytes: int = limits.prealloc_bytes_default  # SYNC: zeros fsynced ahead of appends (0: off)
    retention_ms: int = 72 * 3_600_000
    transaction_timeout_ms: int = limits.transaction_timeout_ms_default
    transaction_check_interval_ms: int = limits.transaction_check_interval_ms_default
    transaction_check_max: int = limits.transaction_check_max_default
    delay_levels: str = DEFAULT_DELAY_LEVELS
    delay_ms_max: int = limits.delay_ms_max_default
    default_queues: int = limits.queues_per_topic_default
    auto_create_topics: bool = True
    max_delivery_attempts: int = limits.max_delivery_attempts_default
    # a group's redelivery delay after each delivery attempt, the last repeating (told to gRPC consumers,
    # which nack with it; the broker's own nack at the auto-renew limit uses it too); empty: RocketMQ's
    # delay levels 1s 5s 10s 30s 1m ... 2h (limits.retry_backoff_ms_default)
    retry_backoff_ms: tuple[int, ...] = field(default=())
    long_polling_ms_default: int = 20_000
    # ReceiveMessage's invisible duration must lie in [receive_invisible_ms_min, invisible_ms_max]
    # (ILLEGAL_INVISIBLE_TIME otherwise; ChangeInvisibleDuration takes 0..invisible_ms_max); an auto-renew
    # receive (the official PushConsumer) leases for invisible_ms_auto_renew. Apache's proxy defaults.
    receive_invisible_ms_min: int = limits.receive_invisible_ms_min_default
    invisible_ms_max: int = limits.invisible_duration_ms_max
    invisible_ms_auto_renew: int = limits.invisible_ms_auto_renew_default
    # a ReceiveMessage asking more is served this many (Apache's proxy: 32); up to receive_batch_max
    grpc_receive_batch_max: int = limits.grpc_receive_batch_max_default
    offset_flush_interval_ms: int = 1_000
    connections_max: int = limits.connections_max
    grpc_concurrent_rpcs_max: int = limits.grpc_concurrent_rpcs_max

    def validate(self) -> BrokerConfig:
        if not 1 <= self.default_queues <= limits.queues_per_topic_max:
            raise errors.InvalidArgument(f"default queues must be 1..{limits.queues_per_topic_max}")
        if self.transaction_check_max < 1:
            raise errors.InvalidArgument("transaction check max must be at least 1")
        if self.transaction_timeout_ms < 0 or self.transaction_check_interval_ms <= 0:
            raise errors.InvalidArgument("transaction timeout must be >= 0 and the check interval > 0")
        if self.segment_bytes < limits.segment_bytes_min:
            raise errors.InvalidArgument(f"segment size must be at least {limits.segment_bytes_min} bytes")
        if self.prealloc_bytes < 0:
            raise errors.InvalidArgument(
                f"preallocation must be 0 (off) or more bytes, got {self.prealloc_bytes}"
            )
        if self.connections_max < 1 or self.grpc_concurrent_rpcs_max < 1:
            raise errors.InvalidArgument("connections_max and grpc_concurrent_rpcs_max must be at least 1")
        if not 0 <= self.receive_invisible_ms_min <= self.invisible_ms_auto_renew <= self.invisible_ms_max:
            raise errors.InvalidArgument(
                "invisible durations must hold 0 <= receive minimum <= auto-renew lease <= maximum, "
                f"got {self.receive_invisible_ms_min} ms, {self.invisible_ms_auto_renew} ms, "
                f"{self.invisible_ms_max} ms"
            )
        if not 1 <= self.grpc_receive_batch_max <= limits.receive_batch_max:
            raise errors.InvalidArgument(f"grpc_receive_batch_max must be 1..{limits.receive_batch_max}")
        TlsMode.parse(self.grpc_tls)
        check_key_pair_given(self.tls_cert_file, self.tls_key_file)
        for port in (self.grpc_port, self.remoting_port, self.namesrv_port):
            if not 0 <= port <= 65535:
                raise errors.InvalidArgument(f"port {port} is out of range")
        from txmq.broker.delay_levels import parse_delay_levels

        parse_delay_levels(self.delay_levels)
        return self

    def retry_delay_ms(self, attempt: int) -> int:
        """The redelivery delay after delivery ``attempt`` (1, 2, ...) failed: the step of the group's
        back-off for it, in whole seconds and at least 1 s, as a gRPC consumer told that back-off nacks
        (protocol.grpc.settings.consumer_reply rounds the steps it sends the same way)."""
        schedule = self.retry_backoff_ms or limits.retry_backoff_ms_default
        step = schedule[min(max(attempt, 1), len(schedule)) - 1]
        return max(1_000, step // 1_000 * 1_000)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    def with_overrides(self, **overrides: Any) -> BrokerConfig:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


_DURATION_FIELDS = {
    "flush_interval_ms": "flush_interval",
    "retention_ms": "retention",
    "transaction_timeout_ms": "transaction_timeout",
    "transaction_check_interval_ms": "transaction_check_interval",
    "delay_ms_max": "delay_max",
    "receive_invisible_ms_min": "receive_invisible_min",
    "invisible_ms_max": "invisible_max",
    "invisible_ms_auto_renew": "invisible_auto_renew",
}


def load_config_file(path: str) -> dict[str, Any]:
    """Read a JSON config file whose keys are BrokerConfig fields (durations may be strings: "6s")."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise errors.InvalidArgument(f"cannot read config file {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise errors.InvalidArgument(f"config file {path} must hold a JSON object")
    known = {f.name for f in fields(BrokerConfig)}
    result: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        for field_name, alias in _DURATION_FIELDS.items():
            if name == alias:
                name = field_name
        if name not in known:
            raise errors.InvalidArgument(f"unknown setting {key!r} in {path}")
        result[name] = _setting(path, key, name, value)
    return result


def _setting(path: str, key: str, name: str, value: Any) -> Any:
    """``value`` as BrokerConfig's field ``name`` takes it; a wrong type is a one-line error naming the key
    (it used to reach the broker as is, or fail later with a traceback)."""
    kind = next(f.type for f in fields(BrokerConfig) if f.name == name)  # a string: annotations are lazy

    def wrong(expected: str) -> errors.InvalidArgument:
        return errors.InvalidArgument(f"setting {key!r} in {path} must be {expected}, not {value!r}")

    if kind == "int" and name.endswith("_ms") and isinstance(value, str):
        try:
            return parse_duration_ms(value)
        except ValueError as exc:
            raise errors.InvalidArgument(f"setting {key!r} in {path}: {exc}") from None
    if kind == "FlushMode":
        try:
            return FlushMode(value)
        except ValueError:
            raise wrong("sync or async") from None
    if kind == "bool":
        if not isinstance(value, bool):
            raise wrong("true or false")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong("an integer" + (' or a duration such as "6s"' if name.endswith("_ms") else ""))
    elif kind.startswith("str"):
        if not (isinstance(value, str) or (value is None and "None" in kind)):
            raise wrong("a string")
    elif kind.startswith("tuple[int"):
        if not isinstance(value, list) or not all(type(v) is int for v in value):
            raise wrong("a list of integers")
        return tuple(value)
    return value
