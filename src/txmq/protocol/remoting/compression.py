"""Bodies a 4.x client sent compressed (sysFlag COMPRESSED): RocketMQ clients deflate a body over
``compressMsgBodyOverHowmuch`` (4 KiB) with zlib and set bit 0 of the send header's sysFlag; bits 8-10
name the codec (0 or 3: zlib, 1: LZ4, 2: ZSTD; the Java client's ``compressType``).

The broker stores the body as sent, so it is inflated once at the remoting door and stored plain: every
consumer, a 4.x one over remoting or a RocketMQ 5 one over gRPC, then gets the body the producer had, as
an Apache broker's consumers do (4.x clients inflate themselves; the Apache proxy inflates for gRPC).
Pure; inflation stops one byte past the body limit (a decompression bomb costs no memory).
"""

from __future__ import annotations

import zlib

from txmq.common import errors, limits

COMPRESSED_FLAG = 0x1
_TYPE_MASK = 0x7 << 8
_TYPE_NAMES = {1: "LZ4", 2: "ZSTD"}


def inflate(body: bytes, sys_flag: int) -> bytes:
    """The plain body of a send whose ``sys_flag`` has COMPRESSED_FLAG; raises ``InvalidArgument``
    (a codec other than zlib, a body that does not inflate) or ``MessageTooLarge``."""
    kind = (sys_flag & _TYPE_MASK) >> 8
    if kind not in (0, 3):
        name = _TYPE_NAMES.get(kind, f"type {kind}")
        raise errors.InvalidArgument(
            f"the message body is {name}-compressed; only zlib is supported "
            "(set the producer's compressType to ZLIB)"
        )
    limit = limits.body_bytes_max
    try:
        inflater = zlib.decompressobj()
        out = inflater.decompress(body, limit + 1)
        if len(out) > limit or inflater.unconsumed_tail:
            raise errors.MessageTooLarge("the inflated message body", len(out), limit)
        if not inflater.eof:
            raise EOFError("the compressed stream is truncated")
    except (zlib.error, EOFError) as exc:
        raise errors.InvalidArgument(
            f"the message body is marked compressed but does not inflate: {exc}"
        ) from None
    return out
