"""Found by tests/fuzz: a layout file with a short payload raised struct.error; metadata JSON of the
wrong shape made Broker.open crash with TypeError/KeyError on every start; admin arguments of the
wrong JSON type (``{"limit": null}``) escaped dispatch as TypeError. All are clear TxmqErrors now."""

from __future__ import annotations

import pytest

from txmq.broker import admin
from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common.clock import FakeClock
from txmq.common.errors import CorruptRecord, InvalidArgument
from txmq.storage.checkpoint import load_layout, write_meta
from txmq.storage.fs import FaultyFileSystem


def test_short_layout_payload_is_corrupt_record() -> None:
    fs = FaultyFileSystem()
    fs.makedirs("/d")
    write_meta(fs, "/d/layout", b"")
    with pytest.raises(CorruptRecord):
        load_layout(fs, "/d")


@pytest.mark.parametrize(
    ("name", "payload"),
    [("topics.json", b"[{}]"), ("transactions.json", b"true"), ("delay_cursors.json", b"true")],
)
async def test_wrong_shaped_metadata_fails_open_clearly(name: str, payload: bytes) -> None:
    fs = FaultyFileSystem()
    fs.makedirs("/b/config")
    write_meta(fs, f"/b/config/{name}", payload)
    with pytest.raises(CorruptRecord, match="malformed"):
        await Broker.open(BrokerConfig(data_dir="/b"), clock=FakeClock(), fs=fs, inline_flush=True)


async def test_admin_argument_of_the_wrong_type_is_invalid_argument() -> None:
    broker = await Broker.open(
        BrokerConfig(data_dir="/b"), clock=FakeClock(), fs=FaultyFileSystem(), inline_flush=True
    )
    with pytest.raises(InvalidArgument):
        await admin.dispatch(broker, "tx.list", {"limit": None})
    await broker.close()
