"""Assertions that survive ``python -O``.

An invariant failure is a programmer error: the only correct handling is to stop. Operating errors
(bad input, full disk) are :class:`txmq.common.errors.TxmqError` subclasses instead.
"""

from __future__ import annotations

from typing import NoReturn


class InvariantViolation(AssertionError):
    """A broken internal invariant. Never caught by txmq code."""


def invariant(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantViolation(message)


def unreachable(message: str) -> NoReturn:
    raise InvariantViolation(f"unreachable: {message}")
