# The C extension's interface (src/txmq/server/remoting/_lanescan.c); producer.py loads it at run time
# (None when it is not built), and convert.lean_batch + SendService._lane_batch stay the reference.
from _typeshed import ReadableBuffer

def lane_scan(
    data: ReadableBuffer,
    tail: ReadableBuffer,
    body_bytes_max: int,
    tag_bytes_max: int,
    keys_count_max: int,
    key_bytes_max: int,
    property_count_max: int,
    properties_bytes_max: int,
) -> (
    tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[int, ...], tuple[tuple[str, ...], ...], list[str], int]
    | None
): ...
def one_scan(
    body: bytes,
    properties: str,
    tail: ReadableBuffer,
    body_bytes_max: int,
    tag_bytes_max: int,
    keys_count_max: int,
    key_bytes_max: int,
    property_count_max: int,
    properties_bytes_max: int,
    keyless: bool = ...,
) -> (
    tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[int, ...], tuple[tuple[str, ...], ...], list[str], int]
    | None
): ...
def keyless_fill(
    head: bytes, keys: tuple[str, ...], tail: bytes, prefix: str, sequence: int
) -> tuple[bytes, tuple[str, ...], str]: ...
def lane_names() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]: ...
