"""Topic permissions: RocketMQ PermName bits, whether given as ``Perm`` or as the int a config file holds."""

from __future__ import annotations

import pytest

from txmq.broker.topics import Perm, TopicConfig


@pytest.mark.parametrize(
    ("perm", "readable", "writable"),
    [
        (Perm.READ_WRITE, True, True),
        (Perm.READ, True, False),
        (Perm.WRITE, False, True),
        (6, True, True),
        (4, True, False),
        (2, False, True),
        (0, False, False),
        (1, False, False),  # INHERIT alone grants nothing
        (7, True, True),
    ],
)
def test_readable_and_writable_follow_the_perm_bits(perm: int, readable: bool, writable: bool) -> None:
    config = TopicConfig("T", perm=perm)
    assert (config.readable, config.writable) == (readable, writable)
