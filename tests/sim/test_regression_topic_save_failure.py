"""Found by the simulation (soak seeds 3313 and 5593): a topic created while its registry file could
not be written (disk full) stayed in memory only. A POP revive created ``%RETRY%<group>`` that way on
a second try and stored the retry copies in it; after a restart the registry had no such topic, the
group's receives never looked at it, and the copies (acknowledged messages) were never delivered.
A failed save now undoes the change in memory too."""

from __future__ import annotations

import pytest

from txmq.common.clock import FakeClock
from txmq.common.errors import StorageError
from txmq.storage.fs import FaultyFileSystem

from .helpers import open_broker


async def test_a_topic_whose_registry_save_failed_does_not_exist() -> None:
    fs, clock = FaultyFileSystem(), FakeClock()
    broker = await open_broker(fs, clock)
    fs.set_space_left(0)
    with pytest.raises(StorageError):
        broker.topics.create("%RETRY%g", queues=1)
    assert broker.topics.get("%RETRY%g") is None
    fs.set_space_left(None)
    created = broker.topics.create("%RETRY%g", queues=1)  # the next try saves it
    await broker.close()
    reopened = await open_broker(fs, clock)
    assert reopened.topics.get("%RETRY%g") == created
    await reopened.close()


async def test_a_deletion_whose_registry_save_failed_keeps_the_topic() -> None:
    fs, clock = FaultyFileSystem(), FakeClock()
    broker = await open_broker(fs, clock)
    created = broker.topics.create("t", queues=2)
    fs.set_space_left(0)
    with pytest.raises(StorageError):
        broker.topics.delete("t")
    assert broker.topics.get("t") == created
    fs.set_space_left(None)
    await broker.close()
