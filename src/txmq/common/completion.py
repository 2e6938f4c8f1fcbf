"""``Completion``: a one-shot awaitable whose success callbacks run synchronously when it is settled.

The group commit hands one to every waiter that only adds done callbacks (``GroupCommit.waiter(
shared=True)``: the remoting door's deferred answers). When the group is durable its callbacks run
inside the very loop callback that completes the group, before the group is dispatched to the
ConsumeQueues: the answers are written first (a uvloop ``transport.write`` sends at once) and the
dispatch follows with no loop turn in between, so a request read after an answer is handled after
the dispatch (read-your-writes holds), while the answer no longer waits for the dispatch's writes.

An ``asyncio.Future`` would run its callbacks one loop turn later (``call_soon``). A failure
(``set_exception``) keeps that timing: its callbacks are scheduled on the loop, as a future's are,
since a failure may be settled from places (a rolled-back write) where running arbitrary answer code
at once is not wanted. A callback that raises is logged, never propagated into the settling code
(the group commit would take it for a failed flush). Awaiting a ``Completion`` waits on a private
future of the running loop, so cancelling an awaiter never cancels the completion itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Generator
from functools import partial
from typing import Any

_LOG = logging.getLogger(__name__)


class Completion:
    """Settled once with :meth:`set_result` (callbacks run now) or :meth:`set_exception` (callbacks
    scheduled on ``loop``). Only the subset of ``asyncio.Future`` the broker's callers use."""

    __slots__ = ("_callbacks", "_done", "_error", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._callbacks: list[Callable[[Completion], object]] = []
        self._done = False
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return False  # nothing can cancel it: awaiters wait on futures of their own

    def exception(self) -> BaseException | None:
        if not self._done:
            raise asyncio.InvalidStateError("the completion is not settled yet")
        return self._error

    def result(self) -> None:
        error = self.exception()
        if error is not None:
            raise error

    def add_done_callback(self, callback: Callable[[Completion], object]) -> None:
        """Call ``callback(self)`` once settled (scheduled on the loop if it is settled already)."""
        if self._done:
            self._loop.call_soon(_call, callback, self)
        else:
            self._callbacks.append(callback)

    def set_result(self, result: None) -> None:
        """Settle successfully and run every callback now, in the order they were added."""
        callbacks = self._settle(None)
        for callback in callbacks:
            _call(callback, self)

    def set_exception(self, error: BaseException) -> None:
        """Settle with ``error``; the callbacks run from the loop, as a future's would."""
        for callback in self._settle(error):
            self._loop.call_soon(_call, callback, self)

    def _settle(self, error: BaseException | None) -> list[Callable[[Completion], object]]:
        if self._done:
            raise asyncio.InvalidStateError("the completion is settled already")
        self._done = True
        self._error = error
        callbacks, self._callbacks = self._callbacks, []
        return callbacks

    def __await__(self) -> Generator[Any, None, None]:
        if not self._done:
            future: asyncio.Future[None] = self._loop.create_future()
            self._callbacks.append(partial(_forward, future))
            yield from future.__await__()
            return
        if self._error is not None:
            raise self._error


def _call(callback: Callable[[Completion], object], completion: Completion) -> None:
    try:
        callback(completion)
    except Exception:  # noqa: BLE001 - a loop callback's rule: logged, the others still run
        _LOG.exception("a completion callback failed: %r", callback)


def _forward(future: asyncio.Future[None], completion: Completion) -> None:
    """Settle an awaiter's private future like ``completion`` (unless the awaiter was cancelled)."""
    if future.done():
        return
    error = completion.exception()
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
