"""``txmq store verify`` / ``repair`` on real directories, run as the operator would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env
from txmq.common.errors import CorruptRecord
from txmq.storage.api import PutRequest, StoreConfig
from txmq.storage.store import MessageStore

SEGMENT = 4096


def _build(data_dir: Path, count: int = 30) -> list[tuple[int, int]]:
    store = MessageStore.open(StoreConfig(data_dir=str(data_dir), segment_bytes=SEGMENT))
    spans = []
    for i in range(count):
        result, _ = store.put_nowait(PutRequest("T", 0, b"%04d" % i + b"z" * 300))
        spans.append((result.physical_offset, result.physical_offset + result.size))
    store.flush()
    store.checkpoint()
    return spans


def _txmq(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txmq", "store", *args],
        capture_output=True, text=True, env=subprocess_env(home), timeout=60, check=False,
    )  # fmt: skip


def _flip(data_dir: Path, offset: int) -> Path:
    path = data_dir / "commitlog" / f"{offset - offset % SEGMENT:020d}"
    raw = bytearray(path.read_bytes())
    raw[offset % SEGMENT + 40] ^= 0x10
    path.write_bytes(bytes(raw))
    return path


def test_verify_clean_store(tmp_path: Path, home_dir: Path) -> None:
    spans = _build(tmp_path)
    done = _txmq(home_dir, "verify", "--data-dir", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["records"] == 30
    assert report["first_offset"] == 0
    assert report["last_offset"] == spans[-1][0]
    assert report["segments"] > 1


def test_mid_log_corruption_verify_then_repair_quarantines(tmp_path: Path, home_dir: Path) -> None:
    spans = _build(tmp_path)
    bad_offset = spans[5][0]
    segment = _flip(tmp_path, bad_offset)
    opened = MessageStore.open(StoreConfig(data_dir=str(tmp_path), segment_bytes=SEGMENT))
    with pytest.raises(CorruptRecord, match="CRC mismatch"):
        opened.read(bad_offset)  # the checkpoint is past it, but every read checks the CRC
    (tmp_path / "checkpoint").unlink()  # a full scan refuses to start
    with pytest.raises(CorruptRecord, match="txmq store repair"):
        MessageStore.open(StoreConfig(data_dir=str(tmp_path), segment_bytes=SEGMENT))
    done = _txmq(home_dir, "verify", "--data-dir", str(tmp_path))
    assert done.returncode == 1
    assert "MID-LOG CORRUPTION" in done.stdout
    assert f"position {bad_offset % SEGMENT}" in done.stdout
    assert "CRC mismatch" in done.stdout
    expected_lost = 30 - 6
    assert f"{expected_lost} valid record(s)" in done.stdout

    refused = _txmq(home_dir, "repair", "--data-dir", str(tmp_path))
    assert refused.returncode == 1
    assert "rerun with --yes" in refused.stdout
    assert (tmp_path / "quarantine" / segment.name).read_bytes() == segment.read_bytes()

    repaired = _txmq(home_dir, "repair", "--data-dir", str(tmp_path), "--yes")
    assert repaired.returncode == 0, repaired.stderr
    assert f"lost: {expected_lost} valid record(s)" in repaired.stdout
    assert _txmq(home_dir, "verify", "--data-dir", str(tmp_path)).returncode == 0
    store = MessageStore.open(StoreConfig(data_dir=str(tmp_path), segment_bytes=SEGMENT))
    assert store.max_offset("T", 0) == 5
    assert store.max_physical_offset == bad_offset


def test_torn_tail_is_reported_and_repaired(tmp_path: Path, home_dir: Path) -> None:
    spans = _build(tmp_path, 10)
    last = tmp_path / "commitlog" / f"{spans[-1][0] - spans[-1][0] % SEGMENT:020d}"
    raw = last.read_bytes()
    last.write_bytes(raw[:-50])
    done = _txmq(home_dir, "verify", "--data-dir", str(tmp_path))
    assert done.returncode == 1
    assert "torn tail" in done.stdout
    repaired = _txmq(home_dir, "repair", "--data-dir", str(tmp_path))
    assert repaired.returncode == 0, repaired.stderr
    assert "truncated" in repaired.stdout
    assert _txmq(home_dir, "verify", "--data-dir", str(tmp_path)).returncode == 0


def test_repair_json_reports_what_was_done(tmp_path: Path, home_dir: Path) -> None:
    spans = _build(tmp_path)
    _flip(tmp_path, spans[5][0])
    waiting = _txmq(home_dir, "repair", "--data-dir", str(tmp_path), "--json")
    assert waiting.returncode == 1, waiting.stderr
    outcome = json.loads(waiting.stdout)
    assert outcome["needs_confirmation"] is True
    assert outcome["records_lost"] == 30 - 6
    assert outcome["records_replayed"] is None  # nothing rebuilt while damage waits for --yes
    assert any("--yes" in action for action in outcome["actions"])

    done = _txmq(home_dir, "repair", "--data-dir", str(tmp_path), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["needs_confirmation"] is False
    assert outcome["records_lost"] == 30 - 6
    assert outcome["records_replayed"] == 5
    assert _txmq(home_dir, "verify", "--data-dir", str(tmp_path)).returncode == 0


def test_verify_and_repair_accept_the_brokers_data_dir(tmp_path: Path, home_dir: Path) -> None:
    # a broker keeps its store in <data dir>/store: the operator gives the broker's --data-dir
    spans = _build(tmp_path / "store")
    (tmp_path / "config").mkdir()
    done = _txmq(home_dir, "verify", "--data-dir", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == 30
    _flip(tmp_path / "store", spans[-1][0])
    done = _txmq(home_dir, "repair", "--data-dir", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data_dir"] == str(tmp_path / "store")
    assert _txmq(home_dir, "verify", "--data-dir", str(tmp_path)).returncode == 0


def test_verify_names_both_places_it_looked(tmp_path: Path, home_dir: Path) -> None:
    done = _txmq(home_dir, "verify", "--data-dir", str(tmp_path))
    assert done.returncode == 2
    assert str(tmp_path / "store") in done.stderr


def test_verify_of_a_brokers_data_dir_checks_its_metadata_files(tmp_path: Path, home_dir: Path) -> None:
    from txmq.broker.persist import MetaFiles
    from txmq.storage.fs import OsFileSystem

    _build(tmp_path / "store")
    meta = MetaFiles(OsFileSystem(), tmp_path / "config")
    meta.save_json("topics.json", {"topics": {}})
    meta.save_json("consumer_offsets.json", {"groups": {}})
    clean = _txmq(home_dir, "verify", "--data-dir", str(tmp_path), "--json")
    assert clean.returncode == 0, clean.stdout
    assert json.loads(clean.stdout)["config_problems"] == []
    damaged = tmp_path / "config" / "topics.json"
    damaged.write_bytes(damaged.read_bytes()[:-3])
    done = _txmq(home_dir, "verify", "--data-dir", str(tmp_path))
    assert done.returncode == 1
    assert f"BROKER METADATA: metadata file {damaged}" in done.stdout
    assert "move it aside" in done.stdout
    as_json = json.loads(_txmq(home_dir, "verify", "--data-dir", str(tmp_path), "--json").stdout)
    assert as_json["ok"] is False
    assert len(as_json["config_problems"]) == 1
