"""Free TCP ports for child brokers (the demo, benchmarks, tests).

Asking the kernel for port 0 and closing the socket hands out a port from the *ephemeral* range, the
same range outgoing connections take their local ports from: a client connecting elsewhere between
the pick and the broker's ``bind`` can take it, and gRPC servers bind with ``SO_REUSEPORT``, so two
brokers given the same port would silently share it. Ports are therefore picked at random *below*
the ephemeral range, checked bindable, and never handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_FALLBACK_EPHEMERAL_LOW = 32768
_LOWEST = 20000
_handed_out: set[int] = set()
_random = random.SystemRandom()


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _FALLBACK_EPHEMERAL_LOW
    return low if low > _LOWEST + 1000 else _FALLBACK_EPHEMERAL_LOW


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on now, outside the ephemeral range, not returned before by this process."""
    high = _ephemeral_low()
    for _ in range(500):
        port = _random.randrange(_LOWEST, high)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    with socket.socket() as sock:  # the low range is exhausted: let the kernel choose
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    _handed_out.add(port)
    return port


def is_wildcard_host(host: str) -> bool:
    """Whether ``host`` is a listen-on-every-address host rather than one address clients can reach."""
    return host in ("", "0.0.0.0", "::", "[::]")
