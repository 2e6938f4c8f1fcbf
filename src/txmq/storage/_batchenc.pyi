# The C extension's interface (src/txmq/storage/_batchenc.c); codec.py and index.py load it at run
# time (None when it is not built), the Python code they fall back to is the reference.
from array import array
from collections.abc import Iterable, Iterator, Sequence

from _typeshed import ReadableBuffer, WriteableBuffer

def encode_batch(
    buf: WriteableBuffer,
    pos: int,
    physical_offset: int,
    sizes: Sequence[int],
    queue_ids: Sequence[int],
    flags: Sequence[int],
    queue_offsets: Iterable[int],
    sys_flags: Sequence[int],
    born_ms: Sequence[int],
    store_ms: int,
    tags_codes: Sequence[int],
    reconsume_times: Sequence[int],
    prepared_offsets: Sequence[int],
    names: Sequence[ReadableBuffer],
    properties: Sequence[ReadableBuffer],
    bodies: Sequence[ReadableBuffer],
) -> list[int]: ...
def key_digests(keys: Sequence[str]) -> bytes: ...
def pack_entries(digests: ReadableBuffer, offsets: Sequence[int], store_ms: int) -> bytes: ...
def offset_ids(prefix: str, offsets: Sequence[int]) -> list[str]: ...
def crc32c(data: ReadableBuffer, value: int = 0) -> int: ...
def crc32c_table(data: ReadableBuffer, value: int = 0) -> int: ...
def hardware() -> bool: ...
def encode_record(
    buf: WriteableBuffer,
    pos: int,
    fields: tuple[object, ...],
    store_host: bytes,
    queue_offset: int,
    physical_offset: int,
    store_ms: int,
) -> int: ...
def pack_units(
    offsets: Sequence[int], sizes: Sequence[int], tags_codes: Sequence[int], start: int
) -> bytes: ...

class Head:
    """The key index's head (hash -> newest entry position) in a C table: a mapping of ints in
    first-insertion order."""

    def __init__(self) -> None: ...
    def get(self, key: object, default: int, /) -> int: ...
    def __getitem__(self, key: int, /) -> int: ...
    def __setitem__(self, key: int, value: int, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[int]: ...
    def keys(self) -> list[int]: ...
    def values(self) -> list[int]: ...
    def items(self) -> list[tuple[int, int]]: ...
    def to_dict(self) -> dict[int, int]: ...

def columns_fit(
    topic: bytes, columns: tuple[object, ...], queue_id_max: int, body_max: int, properties_max: int
) -> bool: ...
def record_sizes(fixed: int, properties: Sequence[object], bodies: Sequence[object]) -> list[int] | None: ...
def head_extend(head: dict[int, int] | Head, digests: ReadableBuffer, first: int) -> bool: ...
def index_add(
    head: dict[int, int] | Head,
    offsets: array[int],
    stamps: array[int],
    previous: array[int],
    pending: bytearray,
    keys: Sequence[str],
    offset: int,
    store_ms: int,
) -> None: ...
def index_add_fresh(
    head: dict[int, int] | Head,
    offsets: array[int],
    stamps: array[int],
    previous: array[int],
    pending: bytearray,
    rows: Sequence[Sequence[str] | None],
    record_offsets: Sequence[int],
    store_ms: int,
) -> bool: ...
def index_add_rows(
    head: dict[int, int] | Head,
    offsets: array[int],
    stamps: array[int],
    previous: array[int],
    pending: bytearray,
    rows: list[Sequence[str]],
    record_offsets: list[int],
    record_stamps: list[int],
) -> bool: ...
def put_unit(pending: bytearray, offset: int, size: int, tags_code: int) -> None: ...
