"""A damaged broker metadata file is refused with a message that says what the operator can do."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.broker.persist import MetaFiles
from txmq.common.errors import CorruptRecord
from txmq.storage.fs import OsFileSystem


def _damage(path: Path, how: str) -> None:
    raw = bytearray(path.read_bytes())
    if how == "flipped":
        raw[-2] ^= 0x20
    elif how == "cut":
        raw = raw[: len(raw) // 2]
    else:
        raw = bytearray()
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("how", ["flipped", "cut", "emptied"])
def test_a_damaged_metadata_file_error_names_the_file_and_the_way_out(tmp_path: Path, how: str) -> None:
    meta = MetaFiles(OsFileSystem(), tmp_path)
    meta.save_json("topics.json", {"topics": {"orders": {"queues": 4}}})
    _damage(tmp_path / "topics.json", how)
    with pytest.raises(CorruptRecord) as caught:
        MetaFiles(OsFileSystem(), tmp_path).load_json("topics.json")
    message = caught.value.message
    assert str(tmp_path / "topics.json") in message
    assert "from a backup" in message
    assert "move it aside" in message
    assert "\n" not in message
