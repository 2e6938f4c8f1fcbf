"""Broker metadata files (topic registry, consumer offsets, service cursors).

Every file is written atomically and checksummed by the storage layer's metafile helper; this module
only maps names to paths and JSON to bytes, so broker code never touches files directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from txmq.common.errors import CorruptRecord, StorageError
from txmq.storage.checkpoint import read_meta, write_meta
from txmq.storage.fs import FileSystem


def damaged_meta_advice(path: str) -> str:
    """What an operator can do about a damaged metadata file (the store itself is not affected)."""
    return (
        f"restore {path} from a backup, or move it aside to start with that file's defaults "
        "(what it recorded is forgotten: topic settings, consumer offsets, delay cursors, transaction "
        "states or POP leases, as its name says; the messages in the store are kept)"
    )


class MetaFiles:
    def __init__(self, fs: FileSystem, directory: Path) -> None:
        self._fs = fs
        self._dir = directory
        fs.makedirs(str(directory))

    def load_json(self, name: str) -> Any | None:
        """The file's JSON value (None if missing). A damaged file raises CorruptRecord naming it, a
        failing disk StorageError: never a bare OSError or ValueError (callers handle TxmqError)."""
        path = str(self._dir / name)
        try:
            payload = read_meta(self._fs, path)
        except OSError as exc:
            raise StorageError(f"cannot read broker metadata {path}: {exc}") from exc
        except CorruptRecord as exc:
            raise CorruptRecord(f"{exc.message}; {damaged_meta_advice(path)}", offset=exc.offset) from None
        if payload is None:
            return None
        try:
            return json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptRecord(
                f"broker metadata {path} is not valid JSON: {exc}; {damaged_meta_advice(path)}"
            ) from None

    def damaged(self) -> list[str]:
        """The error of every ``*.json`` file here that cannot be loaded (an offline check; the
        broker refuses to start on the first one)."""
        problems: list[str] = []
        for name in sorted(self._fs.list_dir(str(self._dir))):
            if name.endswith(".json"):
                try:
                    self.load_json(name)
                except (CorruptRecord, StorageError) as exc:
                    problems.append(exc.message)
        return problems

    def save_json(self, name: str, value: Any) -> None:
        """Replace the file atomically; a disk error (ENOSPC, EIO) surfaces as StorageError so a
        request that had to save metadata (a topic auto-created on send) fails with a clear code."""
        self.save_encoded(name, json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8"))

    def save_encoded(self, name: str, payload: bytes) -> None:
        """:meth:`save_json` for a caller that encoded its (large) JSON value itself."""
        path = str(self._dir / name)
        try:
            write_meta(self._fs, path, payload)
        except OSError as exc:
            raise StorageError(f"cannot write broker metadata {path}: {exc}") from exc
