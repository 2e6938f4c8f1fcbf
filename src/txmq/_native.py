"""Which txmq modules run compiled (mypyc), and the guard against stale compiled modules.

``setup.py`` compiles the modules listed in ``build_native.py`` and records each one's source (size,
mtime, SHA-256) in ``_native_build.txt`` next to this file. Python imports ``foo.<abi>.so`` before
``foo.py``, so after an edit of a compiled module's source the old compiled code would run silently.
:func:`guard` (called by ``import txmq``) refuses that: a compiled module whose source differs from the
one compiled raises :class:`StaleNativeModule` (an ``ImportError``) naming the module and the fix.
It costs one small file read and one ``stat`` per compiled module; a source is hashed only when its
size or mtime changed (a checkout that rewrites the same bytes passes).

``TXMQ_PURE=1`` (at build or at run time) means pure Python: ``setup.py`` compiles nothing, and at
run time the compiled files are ignored (each listed module is imported from its ``.py``; a C
extension, listed with its ``.c``, is not importable, and its user runs its Python reference).

``python -m txmq.native`` prints which modules are compiled; benchmarks print :func:`summary`. This
module is imported by ``import txmq``: keep it small and free of txmq imports.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import NamedTuple

_PKG = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(_PKG, "_native_build.txt")


class StaleNativeModule(ImportError):
    """A compiled module's source changed after it was compiled: rebuild, or run pure."""


class Entry(NamedTuple):
    module: str
    source: str  # absolute path of the source compiled: a .py (mypyc) or a .c (a C extension)
    size: int
    mtime_ns: int
    sha256: str


def pure_wanted() -> bool:
    return os.environ.get("TXMQ_PURE") == "1"


def entries(manifest: str = MANIFEST) -> list[Entry]:
    """The modules of the last build (empty when nothing was compiled); paths are relative to the
    manifest's folder (the package)."""
    base = os.path.dirname(manifest)
    try:
        with open(manifest, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines:
        if not line or line.startswith("#"):
            continue
        module, rel, size, mtime_ns, sha = line.split("\t")
        found.append(Entry(module, os.path.join(base, *rel.split("/")), int(size), int(mtime_ns), sha))
    return found


def _compiled_file(entry: Entry) -> str | None:
    folder, name = os.path.split(entry.source)
    stem = os.path.splitext(name)[0]
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for candidate in names:
        if candidate.startswith(stem + ".") and candidate.endswith((".so", ".pyd")):
            return os.path.join(folder, candidate)
    return None


def _sha256(path: str) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def stale(entry: Entry) -> bool:
    try:
        st = os.stat(entry.source)
    except FileNotFoundError:
        return False  # no source to drift from
    if st.st_size == entry.size and st.st_mtime_ns == entry.mtime_ns:
        return False
    if st.st_size == entry.size and _sha256(entry.source) == entry.sha256:
        return False
    return _compiled_file(entry) is not None  # a deleted .so is no hazard: the .py is imported


class _SourceOnly:
    """A meta path finder importing the listed modules from their .py (TXMQ_PURE=1 at run time); a C
    extension (its source a .c) is not found at all: its importer falls back to the Python code."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources

    def find_spec(
        self, name: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        source = self.sources.get(name)
        if source is None:
            return None
        if not source.endswith(".py"):
            raise ModuleNotFoundError(f"{name}: TXMQ_PURE=1 runs no C extension", name=name)
        from importlib.util import spec_from_file_location

        return spec_from_file_location(name, source)


def guard(manifest: str = MANIFEST) -> None:
    """Called once by ``import txmq``: no stale compiled module runs; TXMQ_PURE=1 runs none."""
    found = entries(manifest)
    if not found:
        return
    if pure_wanted():
        if not any(isinstance(f, _SourceOnly) for f in sys.meta_path):
            sys.meta_path.insert(0, _SourceOnly({e.module: e.source for e in found}))
        return
    bad = [e.module for e in found if stale(e)]
    if bad:
        raise StaleNativeModule(
            f"txmq: compiled module(s) {', '.join(bad)} are older than their source (it changed after "
            "the build, and Python would run the old compiled code): rebuild with `make install` "
            "(or `python setup.py build_ext --inplace`), remove them with `python build_native.py "
            "--clean`, or set TXMQ_PURE=1 to ignore them"
        )


def compiled() -> dict[str, bool]:
    """Each module of the build: True if it runs (or will run) compiled in this process."""
    result: dict[str, bool] = {}
    pure = pure_wanted()
    for entry in entries():
        module = sys.modules.get(entry.module)
        if module is not None:
            result[entry.module] = str(getattr(module, "__file__", "")).endswith((".so", ".pyd"))
        else:
            result[entry.module] = not pure and _compiled_file(entry) is not None
    return result


def summary() -> str:
    """One line for benchmark headers: ``native: mypyc 27/27 modules`` or ``native: pure (...)``."""
    state = compiled()
    on = sum(state.values())
    if on:
        return f"native: mypyc {on}/{len(state)} modules"
    if state and pure_wanted():
        return "native: pure (TXMQ_PURE=1)"
    return "native: pure (not compiled)"
