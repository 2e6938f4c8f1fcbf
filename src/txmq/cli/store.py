"""``txmq store verify`` and ``txmq store repair``: offline checks of a store directory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from txmq.broker.persist import MetaFiles
from txmq.common.errors import TxmqError
from txmq.storage.api import StoreConfig
from txmq.storage.dirlock import StoreLock
from txmq.storage.fs import OsFileSystem
from txmq.storage.store import MessageStore
from txmq.storage.verify import VerifyReport, repair_store, verify_store

store_app = typer.Typer(help="Check and repair a store directory (run while the broker is stopped).")

DataDir = Annotated[
    str, typer.Option("--data-dir", help="The store's directory, or the broker's data directory holding it.")
]
SegmentBytes = Annotated[
    int | None, typer.Option("--segment-bytes", help="Segment size, if the store has no layout file.")
]


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")


def store_dir_of(data_dir: str) -> str | None:
    """The store directory ``data_dir`` names: itself when it holds a ``commitlog`` directory, else
    its ``store`` subdirectory when that does (a broker's ``--data-dir``); None when neither does."""
    for candidate in (data_dir, os.path.join(data_dir, "store")):
        if os.path.isdir(os.path.join(candidate, "commitlog")):
            return candidate
    return None


def _require_dir(data_dir: str) -> str:
    store_dir = store_dir_of(data_dir)
    if store_dir is None:
        typer.echo(
            f"error: neither {data_dir} nor {os.path.join(data_dir, 'store')} has a commitlog directory; "
            "give the broker's --data-dir or its store directory",
            err=True,
        )
        raise typer.Exit(2)
    return store_dir


def config_problems(store_dir: str) -> list[str]:
    """The damaged broker metadata files next to a broker's store (``<data dir>/config`` beside
    ``<data dir>/store``); none when there is no such directory."""
    if os.path.basename(os.path.normpath(store_dir)) != "store":
        return []
    config_dir = os.path.join(os.path.dirname(os.path.normpath(store_dir)), "config")
    if not os.path.isdir(config_dir):
        return []
    return MetaFiles(OsFileSystem(), Path(config_dir)).damaged()


@contextlib.contextmanager
def _locked(data_dir: str) -> Iterator[None]:
    """The store's lock for the command's duration: a running broker makes it fail in one line."""
    try:
        lock = StoreLock.acquire(data_dir)
    except TxmqError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    try:
        yield
    finally:
        lock.release()


def _print_report(report: VerifyReport, config: list[str]) -> None:
    typer.echo(f"data dir:   {report.data_dir} (segment size {report.segment_bytes} bytes)")
    typer.echo(f"segments:   {report.segments}")
    typer.echo(f"records:    {report.records} ({report.bytes} bytes)")
    typer.echo(f"offsets:    first {report.first_offset}, last {report.last_offset}")
    typer.echo(f"checkpoint: {report.checkpoint}")
    if report.ok and not config:
        typer.echo("problems:   none")
    for problem_text in config:
        typer.echo(f"problem:    BROKER METADATA: {problem_text}")
    for problem in report.problems:
        kind = "torn tail (recovery cuts it)" if problem.torn_tail else "MID-LOG CORRUPTION"
        typer.echo(
            f"problem:    {kind}: {problem.segment} position {problem.position} "
            f"(log offset {problem.offset}): {problem.reason}; "
            f"{problem.records_after} valid record(s) / {problem.bytes_after} bytes after it"
        )
    for unit in report.queue_problems:
        typer.echo(
            f"problem:    CONSUMEQUEUE UNIT (repair rebuilds it from the log): {unit.topic}/{unit.queue_id} "
            f"queue offset {unit.queue_offset}: {unit.reason}"
        )


@store_app.command("verify")
def verify(data_dir: DataDir, as_json: Annotated[bool, typer.Option("--json")] = False,
           segment_bytes: SegmentBytes = None) -> None:  # fmt: skip
    """Walk every record of every segment and check every CRC, and the broker's metadata files when
    given a broker's data dir; exit 1 on any problem."""
    data_dir = _require_dir(data_dir)
    try:
        with _locked(data_dir):
            report = verify_store(OsFileSystem(), data_dir, segment_bytes)
            config = config_problems(data_dir)
    except TxmqError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None
    ok = report.ok and not config
    if as_json:
        typer.echo(json.dumps({**report.as_dict(), "config_problems": config, "ok": ok}, indent=2))
    else:
        _print_report(report, config)
    raise typer.Exit(0 if ok else 1)


@store_app.command("repair")
def repair(
    data_dir: DataDir,
    yes: Annotated[bool, typer.Option("--yes", help="Truncate mid-log damage.")] = False,
    segment_bytes: SegmentBytes = None,
    as_json: Annotated[bool, typer.Option("--json", help="print what was done as JSON")] = False,
) -> None:
    """Cut a torn tail; quarantine mid-log corruption (and truncate there with --yes); rebuild indexes.
    Exit 1 when mid-log damage waits for --yes."""
    data_dir = _require_dir(data_dir)
    with _locked(data_dir):
        outcome = _repair(data_dir, yes, segment_bytes)
    if as_json:
        typer.echo(json.dumps(outcome, indent=2))
    else:
        for action in outcome["actions"]:
            typer.echo(action)
        if outcome["records_replayed"] is not None:
            typer.echo(f"rebuilt ConsumeQueues and index: {outcome['records_replayed']} record(s) replayed")
        if outcome["records_lost"] or outcome["bytes_lost"]:
            typer.echo(f"lost: {outcome['records_lost']} valid record(s), {outcome['bytes_lost']} bytes")
    if outcome["needs_confirmation"]:
        raise typer.Exit(1)


def _repair(data_dir: str, yes: bool, segment_bytes: int | None) -> dict[str, Any]:
    """Repair, then (unless mid-log damage waits for --yes) rebuild the derived files by opening the store;
    what was done, as data."""
    fs = OsFileSystem()
    try:
        result = repair_store(fs, data_dir, confirm=yes, segment_bytes=segment_bytes)
    except TxmqError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None
    replayed: int | None = None
    if not result.needs_confirmation:
        report = verify_store(fs, data_dir, segment_bytes)
        store = MessageStore.open(StoreConfig(data_dir=data_dir, segment_bytes=report.segment_bytes), fs=fs)
        asyncio.run(store.close())
        replayed = store.recovery_report.records_scanned
    return {
        "data_dir": data_dir,
        "actions": list(result.actions),
        "needs_confirmation": result.needs_confirmation,
        "records_lost": result.records_lost,
        "bytes_lost": result.bytes_lost,
        "records_replayed": replayed,
    }
