"""``ConsumeQueue`` keeps its next queue offset (``max_offset``) as puts add units, so the dispatcher's
put asks no file handle its size; every other change (load, write, truncation, a dropped unit or file,
a discarded buffer, retirement, a later start) makes it recompute from the files. Hypothesis runs the
same operations on two queues over two in-memory file systems: one as it is, one told to forget the kept
value before every operation (so it always reads the files: the reference). Both must give the same
answers and errors, the same ``max_offset`` (which must also equal what the files say), and the same
files byte for byte, also after a reopen."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txmq.storage.consume_queue import ConsumeQueue, ConsumeQueueSet
from txmq.storage.fs import FaultyFileSystem

UNITS_PER_FILE = 3
DIRECTORY = "/cq/T/0"

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 3), st.integers(1, 40)),  # queue offset skew, log step
        st.tuples(st.just("run"), st.integers(1, 5), st.integers(1, 40)),
        st.tuples(st.just("write"), st.just(0), st.just(0)),
        st.tuples(st.just("discard"), st.just(0), st.just(0)),
        st.tuples(st.just("truncate"), st.integers(0, 400), st.just(0)),
        st.tuples(st.just("drop_last"), st.just(0), st.just(0)),
        st.tuples(st.just("retire"), st.integers(0, 400), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
        st.tuples(st.just("replay"), st.integers(0, 400), st.just(0)),
    ),
    max_size=40,
)


class _Side:
    """One queue and its file system; ``forget``: the reference (recomputes max_offset every time)."""

    def __init__(self, forget: bool) -> None:
        self.fs = FaultyFileSystem()
        self.fs.makedirs(DIRECTORY)
        self.forget = forget
        self.queue = ConsumeQueue(self.fs, DIRECTORY, UNITS_PER_FILE, "T", 0)
        self.queue.load()
        self.log_end = 0  # the next log offset a new unit names

    def apply(self, op: str, a: int, b: int) -> Any:
        queue = self.queue
        if self.forget:
            queue._forget_next()
        try:
            if op == "put":
                expected = queue.max_offset if a == 0 else queue.max_offset + a - 1
                self.log_end += b
                return queue.put(expected, self.log_end, 100 + b, b - 20)
            if op == "run":
                start = queue.max_offset
                offsets = [self.log_end + (i + 1) * b for i in range(a)]
                self.log_end = offsets[-1]
                return queue.put_run(start, offsets, [b] * a, list(range(a)))
            if op == "replay":  # an idempotent replay reaching back into what is there
                offset = min(a, self.log_end)
                return queue.put(queue.max_offset, offset, 1, 0)
            if op == "write":
                return queue.write()
            if op == "discard":
                return queue.discard_pending()
            if op == "truncate":
                if queue._pending:
                    queue.write()
                return queue.truncate_from_physical(a)
            if op == "drop_last":
                if queue._pending:
                    queue.write()
                if not queue.files or queue.files[-1].count == 0:
                    return "nothing to drop"
                return queue.drop_last_unit()
            if op == "retire":
                if queue._pending:
                    queue.write()
                return queue.retire_below(a)
            if op == "reopen":
                if queue._pending:
                    queue.write()
                queue.close()
                self.queue = ConsumeQueue(self.fs, DIRECTORY, UNITS_PER_FILE, "T", 0)
                self.queue.load()
                return None
            raise AssertionError(op)
        except Exception as exc:  # compared with the other side's
            return f"{type(exc).__name__}: {exc}"

    def state(self) -> tuple[Any, ...]:
        queue = self.queue
        files = {path: bytes(f.data) for path, f in sorted(self.fs.files.items())}
        return queue.max_offset, queue.min_offset, queue.max_physical_offset, bytes(queue._pending), files


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ops)
def test_kept_next_offset_is_the_files_offset(ops: list[tuple[str, int, int]]) -> None:
    kept, reference = _Side(False), _Side(True)
    for op, a, b in ops:
        assert kept.apply(op, a, b) == reference.apply(op, a, b), (op, a, b)
        assert kept.state() == reference.state(), (op, a, b)
        assert kept.queue.max_offset == kept.queue._max_offset_of_files()
    for side in (kept, reference):
        if side.queue._pending:
            side.queue.write()
    kept.apply("reopen", 0, 0)
    reference.apply("reopen", 0, 0)
    assert kept.state() == reference.state()


def test_queue_set_finds_each_queue_by_topic_and_id() -> None:
    """``get_or_create`` (two dicts, no tuple) gives the queue ``queues`` holds, named by itself."""
    fs = FaultyFileSystem()
    queues = ConsumeQueueSet(fs, "/cq", 4)
    queues.load()
    made = {(t, q): queues.get_or_create(t, q) for t in ("A", "B") for q in (0, 1, 7)}
    for (topic, queue_id), queue in made.items():
        assert queues.get_or_create(topic, queue_id) is queue
        assert queues.get(topic, queue_id) is queue
        assert queues.queues[(topic, queue_id)] is queue
        assert (queue.topic, queue.queue_id) == (topic, queue_id)
    made[("A", 7)].put(0, 10, 1, 0)
    made[("A", 7)].write()
    reopened = ConsumeQueueSet(fs, "/cq", 4)
    reopened.load()
    queue = reopened.get_or_create("A", 7)
    assert queue is reopened.queues[("A", 7)]
    assert (queue.topic, queue.queue_id, queue.max_offset) == ("A", 7, 1)
