"""A ConsumeQueue unit that names a real, sound record that is not its own (another queue offset of the
same queue, another queue, another topic) is caught on read by the record's own queue id, queue offset
and topic, rebuilt from the log, and the read answers the right records; the rebuilt unit is on disk."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from txmq.protocol.remoting.message_codec import decode_messages
from txmq.server.remoting.convert import PullSink
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.consume_queue import UNIT_BYTES
from txmq.storage.fs import OsFileSystem
from txmq.storage.store import MessageStore
from txmq.storage.verify import verify_store


def _store(path: Path) -> tuple[MessageStore, dict[tuple[str, int], list[tuple[int, int, int]]]]:
    store = MessageStore.open(StoreConfig(data_dir=str(path), segment_bytes=64 * 1024))
    for k in range(12):
        for topic, queue_id in (("T", 0), ("T", 1), ("U", 0)):
            store.put_nowait(
                PutRequest(topic, queue_id, b"%s%d-%d" % (topic.encode(), queue_id, k), tags_code=k)
            )
    store.flush()
    store.checkpoint()
    units = {key: [(u.physical_offset, u.size, u.tags_code) for u in store.queue_units(*key, 0, 32)]
             for key in (("T", 0), ("T", 1), ("U", 0))}  # fmt: skip
    return store, units


def _overwrite(path: Path, queue_id: int, index: int, unit: tuple[int, int, int]) -> None:
    (file,) = (path / "consumequeue" / "T" / str(queue_id)).iterdir()
    data = bytearray(file.read_bytes())
    data[index * UNIT_BYTES : (index + 1) * UNIT_BYTES] = struct.pack(">qiq", *unit)
    file.write_bytes(bytes(data))


@pytest.mark.parametrize("source", [("T", 0, 7), ("T", 1, 4), ("U", 0, 4)])
@pytest.mark.parametrize("path", ["raw", "general", "fused"])
def test_a_unit_naming_another_sound_record_is_rebuilt(
    tmp_path: Path, source: tuple[str, int, int], path: str
) -> None:
    store, units = _store(tmp_path)
    topic, queue_id, index = source
    _overwrite(tmp_path, 0, 4, units[(topic, queue_id)][index])  # unit 4 of T/0 names that record
    report = verify_store(OsFileSystem(), str(tmp_path))
    assert [(p.topic, p.queue_id, p.queue_offset) for p in report.queue_problems] == [("T", 0, 4)]
    expected = [b"T0-%d" % k for k in range(12)]
    if path == "raw":
        got = [bytes(r[13]) for r in store.read_queue_raw("T", 0, 0, 32).records]
    elif path == "fused":  # the remoting pull's: records checked straight into the wire body
        sink = PullSink("T", _no_general)
        read = store.read_queue_into("T", 0, 0, 32, 1 << 20, sink)
        assert (read.next_offset, sink.count) == (12, 12)
        got = [m.body for m in decode_messages(sink.body())]
    else:
        got = [r.body for r in store.read_queue("T", 0, 0, 32).records]
    assert got == expected
    assert verify_store(OsFileSystem(), str(tmp_path)).ok  # rewritten in place and synced
    assert [(u.physical_offset, u.size, u.tags_code) for u in store.queue_units("T", 0, 0, 32)] == units[
        ("T", 0)
    ]


def _no_general(physical_offset: int) -> bytes:
    raise AssertionError(f"record at {physical_offset} should not need the general path")
