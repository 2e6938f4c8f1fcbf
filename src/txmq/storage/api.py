"""The storage contract: what the broker may ask of the store, and what it gets back.

Storage knows bytes and offsets only. It stores records in one CommitLog, assigns queue offsets per
(topic, queue id), derives ConsumeQueues and a key index from the log, and never interprets
properties, delays or transactions. Business rules reach it only as values computed by the broker
(``tags_code``) or as injected functions (``IndexKeysFn``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from txmq.common import limits
from txmq.common.fastinit import slot_init

if TYPE_CHECKING:
    from txmq.storage.codec import RawRecord


class FlushMode(enum.Enum):
    SYNC = "sync"  # group commit: acknowledged after fdatasync covered the record
    ASYNC = "async"  # acknowledged after write(); flushed every flush_interval_ms


@dataclass(frozen=True, slots=True)
class StoreConfig:
    data_dir: str
    flush_mode: FlushMode = FlushMode.SYNC
    flush_interval_ms: int = 500
    segment_bytes: int = 1024 * 1024 * 1024
    consume_queue_units_per_file: int = 300_000
    retention_ms: int = 72 * 3_600_000
    checkpoint_interval_ms: int = 1_000
    store_host: str = "127.0.0.1:10911"
    # zero-filled, fsynced space kept ready after the CommitLog's data, so an append's fdatasync has no
    # file-size change to journal (SYNC mode; prepared off the append path; 0: files grow by appends)
    prealloc_bytes: int = limits.prealloc_bytes_default


@slot_init  # one is built per message of the general send path, three per transaction
@dataclass(frozen=True, slots=True)
class PutRequest:
    """One message to append. ``tags_code`` goes into the ConsumeQueue unit (tag hash, or a
    delivery time for timer queues); the broker computes it."""

    topic: str
    queue_id: int
    body: bytes
    properties: bytes = b""
    tags_code: int = 0
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: str = ""
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # The keys the store's IndexKeysFn would return for ``properties``, when the broker already has
    # them (the send lane): the dispatcher then indexes them without decoding the properties again.
    # None (the default): the dispatcher asks the IndexKeysFn, as recovery always does.
    index_keys: tuple[str, ...] | None = None


class RecordFields(NamedTuple):
    """What the writer knows about one record before it is encoded (``codec`` lays it out). Built by
    the store from a :class:`PutRequest`, or by the broker's send lane directly
    (:meth:`MessageStore.put_records_nowait`). A NamedTuple: built once per message, and a frozen
    dataclass costs several times as much to build."""

    topic: bytes
    queue_id: int
    body: bytes
    properties: bytes
    tags_code: int
    flag: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    index_keys: tuple[str, ...] | None = None  # not stored: as PutRequest.index_keys, for the dispatcher


class AppendResult(NamedTuple):
    """Where an append landed (a NamedTuple: one per message sent, cheap to build)."""

    physical_offset: int
    size: int
    queue_offset: int
    store_timestamp_ms: int


@slot_init  # one is built per record read (receives, lookups, the check service)
@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record read back from the CommitLog (its CRC already verified)."""

    physical_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    properties: bytes
    tags_code: int
    flag: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: str
    store_timestamp_ms: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int


class StoredTuple(NamedTuple):
    """A :class:`StoredRecord`'s fields as a NamedTuple (same names, same order: ``StoredRecord(*t)``
    is the record): for a writer that builds one per message from what it appended (the transaction
    service's kept half), where the dataclass's interpreted ``__init__`` costs more than its use."""

    physical_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    properties: bytes
    tags_code: int
    flag: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: str
    store_timestamp_ms: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int

    @staticmethod
    def of(record: StoredRecord) -> StoredTuple:
        return StoredTuple(
            record.physical_offset, record.size, record.topic, record.queue_id, record.queue_offset,
            record.body, record.properties, record.tags_code, record.flag, record.sys_flag,
            record.born_timestamp_ms, record.born_host, record.store_timestamp_ms, record.store_host,
            record.reconsume_times, record.prepared_transaction_offset,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class QueueUnit:
    """One 20-byte ConsumeQueue unit: where the message is in the log, and its tags code."""

    queue_offset: int
    physical_offset: int
    size: int
    tags_code: int


class ReadStatus(enum.Enum):
    FOUND = "found"
    NO_NEW_MESSAGE = "no_new_message"  # offset == max offset
    OFFSET_TOO_SMALL = "offset_too_small"  # below min offset (retention deleted it)
    OFFSET_OVERFLOW = "offset_overflow"  # beyond max offset
    NO_QUEUE = "no_queue"


@dataclass(frozen=True, slots=True)
class QueueRead:
    status: ReadStatus
    records: Sequence[StoredRecord]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class RawQueueRead:
    """A queue read as raw record fields (``storage.codec.RawRecord``, the pull path's lean form).

    ``records`` skips units a tag-hash filter excluded; ``next_offset`` still counts them."""

    status: ReadStatus
    records: list[RawRecord]
    next_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery found and did. ``truncated_bytes`` > 0 means a torn tail was cut."""

    scanned_from: int
    recovered_to: int
    records_scanned: int
    truncated_at: int | None = None
    truncated_bytes: int = 0
    truncated_records: int = 0
    reason: str = ""
    rebuilt_queues: int = 0
    duration_ms: int = 0
    notes: tuple[str, ...] = field(default=())


# (topic, queue_id, properties bytes) -> keys to index (e.g. KEYS and UNIQ_KEY). Injected by the broker.
IndexKeysFn = Callable[[str, bytes], Sequence[str]]


class HeadMap(Protocol):
    """What the key index reads and writes of its active file's head (a key hash -> the position of
    its newest entry): a ``dict[int, int]`` without the C extension, ``_batchenc.Head`` (the same
    mapping in a C table, iterated in the same order) with it."""

    def get(self, key: int, default: int, /) -> int: ...

    def __setitem__(self, key: int, value: int, /) -> None: ...

    def __contains__(self, key: object, /) -> bool: ...

    def __len__(self) -> int: ...


# Called after records become visible (dispatched): (topic, queue_id, next queue offset)
ArrivalListener = Callable[[str, int, int], None]
