"""Hostile gRPC requests against a real broker: random bytes and random or mutated protobuf requests to
every MessagingService RPC (extreme and negative numbers, absurd batch sizes and durations, long and
invalid-UTF-8 strings, truncated and bit-flipped encodings). Every answer must be a clear status: a v2
code of the 4xx class, or a gRPC INVALID_ARGUMENT/RESOURCE_EXHAUSTED - never INTERNAL, never a v2
internal error; afterwards a normal send and receive still work and the store verifies clean.
``TXMQ_FUZZ_EXAMPLES`` (default 15 per RPC and strategy) runs longer."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.grpc_target import METHODS, BrokerThread, FuzzFigures, alive, call, judge, message_class
from txmq.storage.fs import OsFileSystem
from txmq.storage.verify import verify_store

EXAMPLES = int(os.environ.get("TXMQ_FUZZ_EXAMPLES", "15"))
SLOW_STREAMS = {"Telemetry"}  # a bidi stream stays open until its deadline: fewer, shorter calls
NAMES = ["fz", "alive", "g", "", "%RETRY%g", "%DLQ%g", "RMQ_SYS_TRANS_HALF_TOPIC", "a" * 300, "ZZZZ", "a b"]
INT32 = [0, 1, -1, 32, 1024, 1025, 65_536, 2**31 - 1, -(2**31)]
INT64 = [*INT32, 2**63 - 1, -(2**63), 315_576_000_000, 12 * 3600]
MARKER, INVALID_UTF8 = b"ZZZZ", b"\xff\xfe\xc0\x80"  # same length: the length prefixes stay right


def _scalar(field: Any) -> st.SearchStrategy[Any]:
    t = field.type
    if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32):
        return st.sampled_from(INT32) | st.integers(-(2**31), 2**31 - 1)
    if t in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64):
        return st.sampled_from(INT64) | st.integers(-(2**63), 2**63 - 1)
    if t in (F.TYPE_UINT32, F.TYPE_FIXED32):
        return st.integers(0, 2**32 - 1)
    if t in (F.TYPE_UINT64, F.TYPE_FIXED64):
        return st.integers(0, 2**64 - 1)
    if t == F.TYPE_BOOL:
        return st.booleans()
    if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return st.floats(width=32 if t == F.TYPE_FLOAT else 64)
    if t == F.TYPE_STRING:
        return st.sampled_from(NAMES) | st.text(max_size=40)
    if t == F.TYPE_BYTES:
        return st.binary(max_size=64) | st.sampled_from([b"", b"\x1f\x8b\x08\x00garbage", b"x\x9c\x00"])
    if t == F.TYPE_ENUM:
        return st.integers(-3, 12)
    raise AssertionError(f"unhandled field type {t}")


def _is_map(field: Any) -> bool:
    return bool(field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry)


def message_strategy(descriptor: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Random messages of ``descriptor``: any subset of fields, hostile values, nested up to depth 3."""
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if _is_map(field):
            optional[field.name] = st.dictionaries(
                st.sampled_from(NAMES) | st.text(max_size=8), st.text(max_size=8), max_size=3
            )
            continue
        if field.type == F.TYPE_MESSAGE:
            if depth >= 3:
                continue
            value = message_strategy(field.message_type, depth + 1)
        else:
            value = _scalar(field)
        repeated = field.is_repeated
        optional[field.name] = st.lists(value, max_size=3) if repeated else value
    cls = message_class(descriptor)

    def build(values: dict[str, Any]) -> Any:
        message = cls()
        for name, value in values.items():
            field = descriptor.fields_by_name[name]
            target = getattr(message, name)
            if _is_map(field):
                target.update(value)
            elif field.type == F.TYPE_MESSAGE and field.is_repeated:
                for item in value:
                    target.add().CopyFrom(item)
            elif field.type == F.TYPE_MESSAGE:
                target.CopyFrom(value)
            elif field.is_repeated:
                target.extend(value)
            else:
                setattr(message, name, value)
        return message

    return st.fixed_dictionaries({}, optional=optional).map(build)  # type: ignore[arg-type]


@st.composite
def mutated(draw: st.DrawFn, descriptor: Any) -> bytes:
    """A random valid encoding, then maybe invalid UTF-8 in its strings, a truncation or bit flips."""
    data = bytearray(draw(message_strategy(descriptor)).SerializeToString())
    how = draw(st.sampled_from(["as-is", "utf8", "truncate", "flip", "append"]))
    if how == "utf8":
        data = bytearray(bytes(data).replace(MARKER, INVALID_UTF8))
    elif how == "truncate" and data:
        del data[draw(st.integers(0, len(data) - 1)) :]
    elif how == "flip" and data:
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
    elif how == "append":
        data += draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    target = BrokerThread(Path(tmp_path_factory.mktemp("fuzz-grpc")))
    target.start()
    yield target
    target.stop()
    report = verify_store(OsFileSystem(), str(Path(target.config.data_dir) / "store"))
    assert report.ok, report.problems  # nothing half-written, whatever was thrown at the broker


@pytest.fixture(scope="module")
def figures() -> FuzzFigures:
    return FuzzFigures()


@pytest.fixture(scope="module")
def channel(broker: BrokerThread) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(broker.grpc_endpoint) as opened:
        yield opened


def _timeout(method: Any) -> float:
    return 0.3 if method.name in SLOW_STREAMS else 1.5


def _examples(method: Any) -> int:
    return max(3, EXAMPLES // 5) if method.name in SLOW_STREAMS else EXAMPLES


QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
FUZZ_SETTINGS: dict[str, Any] = {"deadline": None, "database": None, "suppress_health_check": QUIET_CHECKS}


@pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
def test_fuzz_grpc_random_bytes(channel: grpc.Channel, figures: FuzzFigures, method: Any) -> None:
    @settings(max_examples=_examples(method), **FUZZ_SETTINGS)
    @given(payload=st.binary(max_size=256), client_id=st.sampled_from([None, "fuzz-client"]))
    def run(payload: bytes, client_id: str | None) -> None:
        judge(
            figures,
            method,
            payload,
            call(channel, method, payload, client_id=client_id, timeout_s=_timeout(method)),
        )

    before = len(figures.crashes)
    run()
    assert figures.crashes[before:] == []


@pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
def test_fuzz_grpc_structured_and_mutated(channel: grpc.Channel, figures: FuzzFigures, method: Any) -> None:
    @settings(max_examples=_examples(method) * 2, **FUZZ_SETTINGS)
    @given(payload=mutated(method.input_type), client_id=st.sampled_from([None, "fuzz-client"]))
    def run(payload: bytes, client_id: str | None) -> None:
        judge(
            figures,
            method,
            payload,
            call(channel, method, payload, client_id=client_id, timeout_s=_timeout(method)),
        )

    before = len(figures.crashes)
    run()
    assert figures.crashes[before:] == []


def test_the_broker_still_serves_after_the_fuzzing(
    channel: grpc.Channel, figures: FuzzFigures, capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print("\n" + figures.line())
    assert sum(figures.inputs.values()) > 0
    assert alive(channel, uuid.uuid4().hex[:12])
    assert figures.crashes == []
