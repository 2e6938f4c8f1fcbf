"""Broker metadata files (topic registry, consumer offsets, service cursors).

Every file is written atomically and checksummed by the storage layer's metafile helper; this module
only maps names to paths and JSON to bytes, so broker code never touches files directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from txmq.storage.checkpoint import read_meta, write_meta
from txmq.storage.fs import FileSystem


class MetaFiles:
    def __init__(self, fs: FileSystem, directory: Path) -> None:
        self._fs = fs
        self._dir = directory
        fs.makedirs(str(directory))

    def load_json(self, name: str) -> Any | None:
        payload = read_meta(self._fs, str(self._dir / name))
        if payload is None:
            return None
        return json.loads(payload.decode("utf-8"))

    def save_json(self, name: str, value: Any) -> None:
        payload = json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")
        write_meta(self._fs, str(self._dir / name), payload)
