"""One Telemetry stream per endpoint: the client's settings out, the server's replies and commands in.

Telemetry is the only way a v2 server can reach a client (transaction check-backs arrive here as
``RecoverOrphanedTransactionCommand``), so the session keeps the stream open: when it ends or fails it is
reopened after an exponential back-off with jitter, the current settings are written again, and the
reconnect hook runs (the transport re-registers). ``ready`` is set by the first settings reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from txmq.client._backoff import Backoff

log = logging.getLogger(__name__)

SettingsSource = Callable[[], Sequence[Any]]
CommandHandler = Callable[[Any], Awaitable[None]]
ReopenHook = Callable[[], Awaitable[None]]


class TelemetrySession:
    """A self-healing Telemetry stream to one endpoint; see the module docstring."""

    def __init__(
        self,
        stub: Any,
        metadata: Sequence[tuple[str, str]],
        settings: SettingsSource,
        on_command: CommandHandler,
        on_reopen: ReopenHook,
        backoff: Backoff | None = None,
    ) -> None:
        self._stub = stub
        self._metadata = tuple(metadata)
        self._settings = settings
        self._on_command = on_command
        self._on_reopen = on_reopen
        self._backoff = backoff or Backoff(initial_s=0.2, max_s=5.0)
        self._call: Any = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.ready = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        failures = 0
        opened_before = False
        while not self._closing:
            call = self._stub.Telemetry(metadata=self._metadata)
            self._call = call
            try:
                for command in self._settings():
                    await call.write(command)
                if opened_before:
                    await self._on_reopen()
                opened_before = True
                while True:
                    reply = await call.read()
                    if reply is grpc.aio.EOF:
                        break
                    failures = 0
                    await self._on_command(reply)
            except (grpc.aio.AioRpcError, grpc.aio.UsageError, ConnectionError) as exc:
                log.debug("telemetry stream failed: %s", exc)
            except asyncio.CancelledError:
                call.cancel()
                raise
            finally:
                self._call = None
            call.cancel()
            if self.closing():
                return
            self.ready.clear()
            await asyncio.sleep(self._backoff.delay_s(failures))
            failures += 1

    def closing(self) -> bool:
        """Read through a call: ``close()`` sets the flag while ``_run`` awaits."""
        return self._closing

    async def resend(self) -> None:
        """Write the current settings on the open stream (a new topic or subscription)."""
        call = self._call
        if call is None:
            return  # the stream is being reopened; it writes the current settings then
        try:
            for command in self._settings():
                await call.write(command)
        except (grpc.aio.AioRpcError, grpc.aio.UsageError) as exc:
            log.debug("writing settings failed: %s", exc)

    async def close(self) -> None:
        self._closing = True
        call = self._call
        if call is not None:
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError):
                await call.done_writing()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
