"""The staged remoting pull, kept as an oracle for tests and benchmarks (it left ``src/``: PULL_MESSAGE
serves the fused path, ``Broker.pull_into`` with ``convert.PullSink``):

- :func:`pull_raw`: ``Broker.pull`` with the messages as raw record fields (``storage.codec.RawRecord``),
  the same queue positions, filter, statuses, offsets and long polling (the broker's own ``_pull_loop``
  and ``_pull_once_raw``, which ``pull_into`` uses for filtered pulls);
- :func:`pulled`: the wire fields of each raw record, as ``to_wire(to_view(record))`` has them;
- :func:`encode_pulled`: a PULL_MESSAGE body from those fields (``PullBodyWriter``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from txmq.broker.broker import Broker, RawPullResult
from txmq.broker.filtering import TagFilter
from txmq.common import limits
from txmq.protocol.remoting.message_codec import PullBodyWriter
from txmq.server.remoting import convert
from txmq.storage.codec import RawRecord

# One pulled record: body, properties (``k\x01v\x02`` bytes), queue_id, queue_offset, commit_log_offset,
# born_timestamp, born IPv4 (4 bytes), born port, store_timestamp, store IPv4, store port, reconsume_times.
PulledRecord = tuple[bytes | memoryview, bytes, int, int, int, int, bytes, int, int, bytes, int, int]


async def pull_raw(
    broker: Broker,
    *,
    group: str | None,
    topic: str,
    queue_id: int,
    offset: int,
    batch_size: int,
    expression: str | None = None,
    long_poll_ms: int = 0,
    max_bytes: int = limits.pull_bytes_max,
) -> RawPullResult:
    """``Broker.pull`` with the messages as raw record fields; a tag filter passes over units by their
    tags code before reading the log."""

    def once(offset: int, tag_filter: TagFilter) -> tuple[RawPullResult, bool]:
        result = broker._pull_once_raw(topic, queue_id, offset, batch_size, tag_filter, max_bytes)
        return result, bool(result.records)

    return await broker._pull_loop(once, topic, queue_id, offset, batch_size, expression, long_poll_ms)


def pulled(
    records: Sequence[RawRecord], topic: str, general: Callable[[int], bytes]
) -> list[PulledRecord | bytes]:
    """The fields :func:`encode_pulled` writes for each raw record, as ``to_wire(to_view(record))`` has
    them. A record the lean path does not cover byte for byte (a RECONSUME_TIME property, which
    overrides the header's count; a stored topic other than the pulled one; hosts not UTF-8) is
    encoded by ``general(physical_offset)``, the general path, instead (as ``PullSink`` does)."""
    topic_bytes = topic.encode("utf-8")
    result: list[PulledRecord | bytes] = []
    for (_, queue_id, _, queue_offset, physical_offset, _, born_ts, store_ts, _, reconsume, _, names,
         properties, body) in records:  # fmt: skip
        wire = convert._wire_names[names] if names in convert._wire_names else convert._names_for_wire(names)
        if wire is None or wire[0] != topic_bytes or properties.find(convert._RECONSUME_KEY) >= 0:
            result.append(general(physical_offset))
            continue
        born, store = wire[1], wire[2]
        result.append((body, properties, queue_id, queue_offset, physical_offset, born_ts, born[0], born[1],
                       store_ts, store[0], store[1], reconsume))  # fmt: skip
    return result


def encode_pulled(topic: str, records: list[PulledRecord | bytes]) -> bytes:
    """A PULL_MESSAGE response body from raw fields: byte for byte what ``encode_messages`` writes for
    the same messages with ``sys_flag``, ``flag`` and the prepared offset 0 and the body CRC computed
    (what the broker's ``to_wire`` builds). A ``bytes`` item is a record encoded already (the general
    path's), copied as it is."""
    if not records:
        return b""
    writer = PullBodyWriter(topic)
    for record in records:
        if isinstance(record, bytes):
            writer.add_encoded(record)
            continue
        (body, properties, queue_id, queue_offset, commit_log_offset, born_ts, born_ip, born_port, store_ts,
         store_ip, store_port, reconsume) = record  # fmt: skip
        writer.add(body, properties, queue_id, queue_offset, commit_log_offset, born_ts, born_ip, born_port,
                   store_ts, store_ip, store_port, reconsume)  # fmt: skip
    return writer.getvalue()
