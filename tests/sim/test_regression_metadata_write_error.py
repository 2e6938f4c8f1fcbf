"""Found by the simulation: a send that auto-created its topic while the disk failed an fsync raised a
bare OSError out of Broker.send (front doors map only TxmqError to a status). Metadata writes now
fail with StorageError; unreadable metadata JSON with CorruptRecord."""

from __future__ import annotations

import errno

import pytest

from txmq.broker.persist import MetaFiles
from txmq.common.clock import FakeClock
from txmq.common.errors import CorruptRecord, StorageError
from txmq.common.message import Message
from txmq.storage.checkpoint import write_meta
from txmq.storage.fs import FaultyFileSystem

from .helpers import CTX, open_broker


async def test_send_creating_a_topic_on_a_failing_disk_raises_storage_error() -> None:
    fs = FaultyFileSystem()
    broker = await open_broker(fs, FakeClock())
    fs.fail_next_sync(errno.EIO)
    with pytest.raises(StorageError):
        await broker.send([Message(topic="fresh", body=b"x")], CTX)
    (result,) = await broker.send([Message(topic="fresh", body=b"y")], CTX)  # the disk works again
    assert result.queue.topic == "fresh"
    await broker.close()


def test_metadata_that_is_not_json_is_a_corrupt_record() -> None:
    fs = FaultyFileSystem()
    meta = MetaFiles(fs, __import__("pathlib").Path("/m"))
    write_meta(fs, "/m/offsets.json", b"\xff{not json")
    with pytest.raises(CorruptRecord, match="not valid JSON"):
        meta.load_json("offsets.json")
