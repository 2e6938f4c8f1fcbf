"""``free_port``: outside the ephemeral range, bindable, never handed out twice by one process."""

from __future__ import annotations

import socket

from txmq.common import ports


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    picked = [ports.free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)
    low = ports._ephemeral_low()
    assert all(ports._LOWEST <= p < low for p in picked)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", picked[-1]))


def test_a_port_in_use_is_not_handed_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        busy = listener.getsockname()[1]
        assert not ports._bindable(busy)
