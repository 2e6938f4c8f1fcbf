"""CRC-32 (zlib's polynomial, ``java.util.zip.CRC32``) for RocketMQ's body CRC, as fast as installed.

The broker computes the body CRC of every record it answers a pull with (``PullBodyWriter``). The
zlib that CPython links here (1.2.13) has no folded (carry-less multiply) CRC: 0.42 us of CPU per KiB,
~9% of the broker's CPU per 1 KiB message on a large pull. ISA-L's ``crc32`` (``pip install isal``),
the same function, takes 0.08 us (a dependency). ``crc32`` is ISA-L's when the
``isal`` package imports and agrees with zlib on a check value, else ``zlib.crc32``.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any, Final

_CHECK: Final = b"123456789"


def _pick() -> tuple[Callable[..., int], str]:
    try:
        module: Any = importlib.import_module("isal.isal_zlib")
        fast: Callable[..., int] = module.crc32
        if fast(_CHECK) == zlib.crc32(_CHECK) and fast(_CHECK, 7) == zlib.crc32(_CHECK, 7):
            return fast, "isal"
    except (ImportError, AttributeError, TypeError):
        pass
    return zlib.crc32, "zlib"


crc32, IMPLEMENTATION = _pick()
"""``crc32(data[, value])`` of any bytes-like ``data``, as ``zlib.crc32``; ``IMPLEMENTATION`` says whose."""
