"""Single appends dispatched together (a group of pipelined sends: the dispatcher takes the ones that
follow each other in one queue with one store time as a run, ``Dispatcher._dispatch_run``) leave the
ConsumeQueue units and key index entries that dispatching them one at a time leaves, byte for byte,
also after a reopen that replays part of them."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property.test_batch_append import NOW_MS, STORE_HOST, _files, requests
from txmq.broker.records import index_keys
from txmq.common.clock import FakeClock
from txmq.storage.api import FlushMode, PutRequest, StoreConfig
from txmq.storage.fs import FaultyFileSystem
from txmq.storage.store import MessageStore


def _open(fs: FaultyFileSystem) -> MessageStore:
    """A SYNC store without a running loop: appends wait in the group until ``flush`` writes and
    dispatches them together (an ASYNC one would write and dispatch each append at once)."""
    config = StoreConfig(
        data_dir="/data", flush_mode=FlushMode.SYNC, segment_bytes=1 << 16, store_host=STORE_HOST
    )
    return MessageStore.open(config, fs=fs, clock=FakeClock(start_ms=NOW_MS), index_keys=index_keys)


_steps = st.lists(
    st.tuples(requests, st.sampled_from([0, 0, 0, 1]), st.booleans()), min_size=1, max_size=24
)  # (request, clock advance before it, whether its index keys are given)


def _clock(store: object) -> FakeClock:
    clock = store.clock  # type: ignore[attr-defined]
    assert isinstance(clock, FakeClock)
    return clock


def _put_all(fs: FaultyFileSystem, steps: list[tuple[PutRequest, int, bool]], each: bool) -> object:
    store = _open(fs)
    for req, advance, known in steps:
        _clock(store).advance(advance)
        if known:
            req = dataclasses.replace(req, index_keys=tuple(index_keys(req.topic, req.properties)))
        store.put_nowait(req)
        if each:
            store.flush()  # written and dispatched alone
    store.flush()  # the rest as one group: runs where they follow each other
    return store


@settings(max_examples=200, deadline=None)
@given(steps=_steps, one_queue=st.booleans())
def test_runs_leave_the_files_single_dispatches_leave(
    steps: list[tuple[PutRequest, int, bool]], one_queue: bool
) -> None:
    if one_queue:  # the async-256 shape: every send to one queue
        steps = [(dataclasses.replace(r, topic="T", queue_id=0), a, k) for r, a, k in steps]
    single_fs, grouped_fs = FaultyFileSystem(), FaultyFileSystem()
    single = _put_all(single_fs, steps, each=True)
    grouped = _put_all(grouped_fs, steps, each=False)
    assert _files(grouped_fs) == _files(single_fs)
    for key in ("k1", "k2", "k3", "id-a", "id-b"):
        assert grouped.query_by_key(key, 64) == single.query_by_key(key, 64)  # type: ignore[attr-defined]
    for topic in ("T", "U"):
        for queue_id in (0, 1, 3):
            a = grouped.read_queue(topic, queue_id, 0, 64)  # type: ignore[attr-defined]
            b = single.read_queue(topic, queue_id, 0, 64)  # type: ignore[attr-defined]
            assert (a.status, a.records, a.next_offset) == (b.status, b.records, b.next_offset)


@settings(max_examples=50, deadline=None)
@given(batch=st.lists(requests, min_size=2, max_size=10), first=st.integers(0, 5))
def test_a_run_after_a_replayed_prefix_is_dispatched_like_singles(
    batch: list[PutRequest], first: int
) -> None:
    """Reopening replays the log's tail into queues and an index that may hold part of it already;
    appends grouped afterwards continue them exactly as appends dispatched one at a time do."""
    batch = [dataclasses.replace(r, topic="T", queue_id=0) for r in batch]
    single_fs, grouped_fs = FaultyFileSystem(), FaultyFileSystem()
    for fs in (single_fs, grouped_fs):
        store = _open(fs)
        for req in batch[:first]:
            store.put_nowait(req)
        store.flush()
    single, grouped = _open(single_fs), _open(grouped_fs)
    for req in batch:
        single.put_nowait(req)
        single.flush()
        grouped.put_nowait(req)
    grouped.flush()
    assert _files(grouped_fs) == _files(single_fs)
