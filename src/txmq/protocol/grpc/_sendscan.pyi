# The C extension's interface (src/txmq/protocol/grpc/_sendscan.c); grpc_server loads it at run time
# (None when it is not built), and wire.send_lane + checks.check_lean + the send lane stay the reference.
from _typeshed import ReadableBuffer

def send_scan(
    data: ReadableBuffer,
    tail: ReadableBuffer,
    body_bytes_max: int,
    tag_bytes_max: int,
    keys_count_max: int,
    key_bytes_max: int,
    property_count_max: int,
    properties_bytes_max: int,
) -> (
    tuple[
        str,
        str,
        tuple[
            tuple[bytes, ...], tuple[bytes, ...], tuple[int, ...], tuple[tuple[str, ...], ...], list[str], int
        ],
    ]
    | None
): ...
