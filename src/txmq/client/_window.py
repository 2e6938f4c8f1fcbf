"""A bounded in-flight window: back-pressure by message count and bytes, awaited with a timeout.

A producer that sends faster than the broker answers would otherwise queue futures without bound; with
the window, ``acquire`` waits for room and raises ``SendTimeout`` when none appears in time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

from txmq.common import errors


class InFlightWindow:
    def __init__(self, max_messages: int, max_bytes: int) -> None:
        if max_messages < 1 or max_bytes < 1:
            raise errors.InvalidArgument("the in-flight window needs room for at least one message")
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.messages = 0
        self.bytes = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    def _fits(self, nbytes: int) -> bool:
        if self.messages == 0:
            return True  # one oversized message may always go alone
        return self.messages < self.max_messages and self.bytes + nbytes <= self.max_bytes

    def try_acquire(self, nbytes: int) -> bool:
        """Reserve room for one request of ``nbytes`` if there is room now (and nobody waits before)."""
        # _fits inline: this runs once per send
        messages = self.messages
        if not self._waiters and (
            messages == 0 or (messages < self.max_messages and self.bytes + nbytes <= self.max_bytes)
        ):
            self.messages = messages + 1
            self.bytes += nbytes
            return True
        return False

    async def acquire(self, nbytes: int, timeout_s: float) -> None:
        """Reserve room for one request of ``nbytes``; ``SendTimeout`` after ``timeout_s``."""
        if self.try_acquire(nbytes):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (nbytes, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, timeout_s)
        except BaseException as exc:
            if future.done() and not future.cancelled():
                self.release(nbytes)  # room was handed over, but this sender gives up
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(entry)
            if isinstance(exc, TimeoutError):
                raise errors.SendTimeout(
                    f"{self.messages} sends ({self.bytes} bytes) in flight for {timeout_s:.3g}s: "
                    "the broker is slower than the producer"
                ) from None
            raise

    def release(self, nbytes: int) -> None:
        self.messages -= 1
        self.bytes -= nbytes
        if self._waiters:  # nobody waits most of the time: no call
            self._wake()

    def _wake(self) -> None:
        """Hand room to waiters in arrival order (the room is reserved for them before they run)."""
        while self._waiters and self._fits(self._waiters[0][0]):
            nbytes, future = self._waiters.popleft()
            if future.done():
                continue
            self.messages += 1
            self.bytes += nbytes
            future.set_result(None)
