"""Message ids.

* Client message id (RocketMQ 5 ``docs/message_id.md``): 17 bytes as 34 upper-case hex characters:
  version ``01`` · 6 bytes of host id · 2 bytes pid · 4 bytes seconds since 2021-01-01 · 4 bytes sequence.
* Offset message id (4.x ``createMessageId``): store IPv4 (4) · port (4) · commit-log offset (8),
  32 hex characters. txmq answers both in queries.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
import uuid
from typing import Final

_EPOCH_2021_S = 1_609_459_200
_lock = threading.Lock()
_sequence = itertools.count(int.from_bytes(os.urandom(3), "big"))
_next_sequence = _sequence.__next__
SEQUENCE: itertools.count[int] = _sequence  # every id's sequence number comes from here, once
_HOST_ID = uuid.getnode().to_bytes(6, "big")
_PID = [os.getpid() & 0xFFFF]  # read once per process (a syscall per id showed in the send profile)
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid() & 0xFFFF))
_ID_TAIL = struct.Struct(">HII")


# (seconds, pid, the id's first 26 hex characters for them): the part every id of one second shares,
# formatted once a second (a tuple replaced whole, so a thread reads one consistent entry)
_PREFIX: list[tuple[int, int, str]] = [(-1, -1, "")]


# (now_ms, pid, prefix): the last id_prefix answer, returned again for the same millisecond and pid
# without the seconds' arithmetic (a floor division of a 41-bit int, ~500 instructions compiled)
_LAST: list[tuple[int, int, str]] = [(-1, -1, "")]


def _seconds(now_ms: int) -> int:
    """An id's seconds field: ``max(0, now_ms // 1000 - _EPOCH_2021_S) & 0xFFFFFFFF`` (without the
    builtin ``max``, a generic call compiled)."""
    seconds = now_ms // 1000 - _EPOCH_2021_S
    return (seconds if seconds > 0 else 0) & 0xFFFFFFFF


def _prefix(seconds: int, pid: int) -> str:
    text = (b"\x01" + _HOST_ID + _ID_TAIL.pack(pid, seconds, 0)[:6]).hex().upper()
    _PREFIX[0] = (seconds, pid, text)
    return text


def id_prefix(now_ms: int) -> str:
    """The first 26 hex characters of the ids :func:`new_message_id` makes at ``now_ms`` (version,
    host, pid, seconds), formatted once a second; an id is this and ``"%08X" % (next(SEQUENCE) &
    0xFFFFFFFF)`` (how ``client/_batchsend.c``'s ``plain_batch`` makes a batch's ids)."""
    pid = _PID[0]
    last = _LAST[0]
    if last[0] == now_ms and last[1] == pid:  # the usual case: many ids a millisecond
        return last[2]
    seconds = _seconds(now_ms)
    cached = _PREFIX[0]
    text = cached[2] if cached[0] == seconds and cached[1] == pid else _prefix(seconds, pid)
    _LAST[0] = (now_ms, pid, text)
    return text


def next_sequence() -> int:
    """The next id's sequence number, below 2**32: an id made elsewhere (``_lanescan.keyless_fill``)
    is :func:`id_prefix` and ``"%08X"`` of it, what :func:`new_message_id` gives for the same draw."""
    return _next_sequence() & 0xFFFFFFFF


def new_message_id(now_ms: int) -> str:
    """A unique client message id (34 hex chars): ``(b"\x01" + host + pack(pid, seconds, sequence))
    .hex().upper()``, the shared 26 characters formatted once per second (tests/unit/test_msgid.py)."""
    seq = _next_sequence() & 0xFFFFFFFF  # itertools.count: one C call, atomic under the GIL (no lock)
    seconds = _seconds(now_ms)
    pid = _PID[0]
    cached = _PREFIX[0]
    prefix = cached[2] if cached[0] == seconds and cached[1] == pid else _prefix(seconds, pid)
    # "%08X": compiled, an f-string's format spec becomes two str.format calls (~2k instructions each)
    return prefix + "%08X" % seq  # noqa: UP031


def new_message_ids(now_ms: int, count: int) -> list[str]:
    """``count`` unique client message ids at once (a batch's): what ``count`` calls of
    :func:`new_message_id` give, the shared 26 hex characters formatted once."""
    with _lock:
        sequences = list(itertools.islice(_sequence, count))
    seconds = _seconds(now_ms)
    prefix = (b"\x01" + _HOST_ID + _ID_TAIL.pack(_PID[0], seconds, 0)[:6]).hex().upper()
    # every sequence's 8 hex characters out of one pack and one hex(), then sliced (a format per id cost more)
    tails = struct.pack(f">{count}I", *[seq & 0xFFFFFFFF for seq in sequences]).hex().upper()
    return [prefix + tails[i : i + 8] for i in range(0, 8 * count, 8)]


def offset_message_id(host: str, port: int, commit_log_offset: int) -> str:
    try:
        ip = socket.inet_aton(host)
    except OSError:
        ip = b"\x7f\x00\x00\x01"
    return (ip + struct.pack(">iq", port, commit_log_offset)).hex().upper()


def parse_offset_message_id(message_id: str) -> tuple[str, int, int] | None:
    """(host, port, commit-log offset) of an offset message id, or None if it is not one."""
    if len(message_id) != 32:
        return None
    try:
        raw = bytes.fromhex(message_id)
    except ValueError:
        return None
    if len(raw) != 16:  # fromhex skips whitespace: 32 characters with spaces are fewer bytes
        return None
    port, offset = struct.unpack(">iq", raw[4:])
    return socket.inet_ntoa(raw[:4]), port, offset


_U64: Final = 0xFFFF_FFFF_FFFF_FFFF


def offset_of_offset_message_id(message_id: str) -> int | None:
    """The commit-log offset of an offset message id, or None if it is not one: what
    ``parse_offset_message_id(message_id)[2]`` gives (tests/property/test_msgid_offset.py), without
    ``bytes.fromhex``, ``struct`` and ``inet_ntoa`` (only the offset is needed for a half's view and
    its END_TRANSACTION). 32 ASCII letters and digits, none an ``x`` (``int(..., 16)`` would read a
    ``0x`` prefix ``fromhex`` refuses), are hex exactly when ``int(..., 16)`` reads them."""
    if len(message_id) != 32 or not message_id.isascii() or not message_id.isalnum():
        return None
    if "x" in message_id or "X" in message_id:
        return None
    try:
        value = int(message_id, 16)
    except ValueError:
        return None
    offset = value & _U64
    return offset - (1 << 64) if offset >> 63 else offset
