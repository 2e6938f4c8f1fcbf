"""Answer first, then dispatch: a SYNC group's shared waiter (a ``Completion``, what the remoting door
waits on) runs its callbacks inside the callback that makes the group durable, before the group is
dispatched to the ConsumeQueues, and the dispatch follows in the same call: anything the loop runs
after an answer (the next request read) sees the record. Futures and coroutines (gRPC, the SDK) resume
after the dispatch, as before."""

from __future__ import annotations

import asyncio
import errno

import pytest

from txmq.common.clock import FakeClock
from txmq.common.completion import Completion
from txmq.common.errors import StoreFenced
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore

CONFIG = StoreConfig(data_dir="/d", segment_bytes=64 * 1024, checkpoint_interval_ms=3_600_000)


async def _started(fs: FaultyFileSystem) -> MessageStore:
    store = MessageStore.open(CONFIG, fs=fs, clock=FakeClock())
    await store.start()
    await store.put(PutRequest("T", 0, b"first"))  # files exist: later groups are plain ones
    return store


def _visible(store: MessageStore, queue_offset: int) -> bool:
    return bool(store.read_queue("T", 0, queue_offset, 1).records)


async def test_a_shared_waiter_answers_before_the_dispatch_and_the_loop_sees_the_record_after() -> None:
    store = await _started(FaultyFileSystem())
    loop = asyncio.get_running_loop()
    seen: dict[str, object] = {}
    later = loop.create_future()
    try:
        appended, durable = store.put_nowait(PutRequest("T", 0, b"shared"), shared=True)
        assert type(durable) is Completion
        _, other = store.put_nowait(PutRequest("T", 0, b"awaited"))  # same group, a future

        def answer(done: object) -> None:
            # the answer runs once the group is durable, before its ConsumeQueue entries exist ...
            seen["flushed"] = store.flushed_offset >= appended.physical_offset + appended.size
            seen["dispatched_at_answer"] = store.dispatched_offset
            seen["visible_at_answer"] = _visible(store, 1)
            # ... and whatever the loop runs next (a request read after the answer) finds them
            loop.call_soon(lambda: later.set_result(_visible(store, 1) and _visible(store, 2)))

        durable.add_done_callback(answer)  # type: ignore[union-attr]  # a Completion
        await other  # a future: resumes after the dispatch
        assert _visible(store, 2)
        assert await later is True
        assert seen["flushed"] is True
        assert seen["visible_at_answer"] is False
        assert seen["dispatched_at_answer"] == appended.physical_offset  # the record before it only
    finally:
        await store.close()


async def test_appends_sharing_a_group_share_its_completion_and_awaiting_it_works() -> None:
    store = await _started(FaultyFileSystem())
    try:
        _, first = store.put_nowait(PutRequest("T", 0, b"a"), shared=True)
        _, second = store.put_nowait(PutRequest("T", 0, b"b"), shared=True)
        assert first is second
        waiter = asyncio.ensure_future(_await(first))
        cancelled = asyncio.ensure_future(_await(first))
        await asyncio.sleep(0)
        cancelled.cancel()  # an awaiter cancelled never cancels the group's completion
        await waiter
        assert first.done() and not first.cancelled()  # type: ignore[union-attr]
        assert _visible(store, 2)
    finally:
        await store.close()


async def _await(durable: object) -> None:
    await durable  # type: ignore[misc]


async def test_a_failed_fsync_fails_the_shared_waiter_from_the_loop() -> None:
    fs = FaultyFileSystem()
    store = await _started(fs)
    try:
        _, durable = store.put_nowait(PutRequest("T", 0, b"lost"), shared=True)
        failures: list[BaseException | None] = []
        durable.add_done_callback(lambda done: failures.append(done.exception()))  # type: ignore[union-attr]
        fs.fail_next_sync(errno.EIO)
        with pytest.raises(StoreFenced):
            await durable
        await asyncio.sleep(0)
        assert len(failures) == 1 and isinstance(failures[0], StoreFenced)
        assert not _visible(store, 1)
    finally:
        await store.close()


async def test_completion_runs_success_callbacks_now_failures_from_the_loop_and_survives_a_bad_one() -> None:
    loop = asyncio.get_running_loop()
    calls: list[str] = []
    ok = Completion(loop)

    def bad(_: Completion) -> None:
        raise RuntimeError("a buggy answer")

    ok.add_done_callback(bad)
    ok.add_done_callback(lambda _: calls.append("ok"))
    ok.set_result(None)
    assert calls == ["ok"]  # at once, a bad callback before it logged and skipped
    ok.add_done_callback(lambda _: calls.append("late"))  # settled already: from the loop
    assert calls == ["ok"]
    failed = Completion(loop)
    failed.add_done_callback(lambda c: calls.append(f"failed {c.exception()}"))
    failed.set_exception(OSError("eio"))
    assert calls == ["ok"]
    await asyncio.sleep(0)
    assert calls == ["ok", "late", "failed eio"]
    with pytest.raises(OSError):
        await failed
    with pytest.raises(asyncio.InvalidStateError):
        ok.set_result(None)
    with pytest.raises(asyncio.InvalidStateError):
        Completion(loop).exception()
