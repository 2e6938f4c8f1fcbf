"""The mypyc build's guard: a compiled module whose source changed is refused, TXMQ_PURE=1 runs none."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import build_native
import pytest

from tests.conftest import subprocess_env
from txmq import _native, native

SO = "cpython-311-x86_64-linux-gnu.so"


def _manifest(folder: Path, module: str, rel: str) -> Path:
    source = folder / rel
    st = source.stat()
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    path = folder / "_native_build.txt"
    path.write_text(f"# header\n{module}\t{rel}\t{st.st_size}\t{st.st_mtime_ns}\t{sha}\n")
    return path


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A fake build: pkg/mod.py, its (dummy) compiled file and a manifest recording the source."""
    monkeypatch.delenv("TXMQ_PURE", raising=False)
    (tmp_path / "pkg").mkdir()
    source = tmp_path / "pkg" / "mod.py"
    source.write_text("X = 1\n")
    (tmp_path / "pkg" / f"mod.{SO}").write_bytes(b"")
    return source, _manifest(tmp_path, "fakepkg.pkg.mod", "pkg/mod.py")


def test_an_unchanged_source_passes(built: tuple[Path, Path]) -> None:
    _, manifest = built
    (entry,) = _native.entries(str(manifest))
    assert not _native.stale(entry)
    _native.guard(str(manifest))


def test_rewriting_the_same_bytes_passes(built: tuple[Path, Path]) -> None:
    source, manifest = built
    os.utime(source, ns=(1, 1))  # a checkout: new mtime, same content
    (entry,) = _native.entries(str(manifest))
    assert not _native.stale(entry)
    _native.guard(str(manifest))


@pytest.mark.parametrize("content", ["X = 2\n", "X = 1\n# a comment\n", ""])
def test_an_edited_source_is_refused_at_import(built: tuple[Path, Path], content: str) -> None:
    source, manifest = built
    source.write_text(content)
    os.utime(source, ns=(1, 1))
    with pytest.raises(_native.StaleNativeModule, match=r"fakepkg\.pkg\.mod.*make install"):
        _native.guard(str(manifest))


def test_an_edited_source_without_its_compiled_file_is_no_hazard(built: tuple[Path, Path]) -> None:
    source, manifest = built
    source.write_text("X = 2\n")
    (source.parent / f"mod.{SO}").unlink()
    _native.guard(str(manifest))


def test_pure_at_run_time_imports_listed_modules_from_source(
    built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, manifest = built
    monkeypatch.setenv("TXMQ_PURE", "1")
    (manifest.parent / "pkg" / "mod.py").write_text("X = 3\n")  # stale, but pure: no complaint
    before = list(sys.meta_path)
    # a process already running pure (TXMQ_PURE=1 for the whole suite) has txmq's own finder installed
    sys.meta_path[:] = [f for f in before if not isinstance(f, _native._SourceOnly)]
    try:
        _native.guard(str(manifest))
        finder = sys.meta_path[0]
        assert isinstance(finder, _native._SourceOnly)
        spec = finder.find_spec("fakepkg.pkg.mod")
        assert spec is not None
        assert spec.origin == str(manifest.parent / "pkg" / "mod.py")
        assert finder.find_spec("fakepkg.other") is None
    finally:
        sys.meta_path[:] = before


@pytest.fixture
def built_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A fake build of a hand-written C extension: pkg/ext.c, its compiled file, the manifest."""
    monkeypatch.delenv("TXMQ_PURE", raising=False)
    (tmp_path / "pkg").mkdir()
    source = tmp_path / "pkg" / "ext.c"
    source.write_text("int x;\n")
    (tmp_path / "pkg" / f"ext.{SO}").write_bytes(b"")
    return source, _manifest(tmp_path, "fakepkg.pkg.ext", "pkg/ext.c")


def test_an_edited_c_source_is_refused_at_import(built_c: tuple[Path, Path]) -> None:
    """A C extension's .c is guarded as a mypyc module's .py: its compiled file is found by the
    source's stem, and a changed source with that file present is a stale build."""
    source, manifest = built_c
    (entry,) = _native.entries(str(manifest))
    assert _native._compiled_file(entry) == str(source.parent / f"ext.{SO}")
    _native.guard(str(manifest))
    source.write_text("int y;\n")
    os.utime(source, ns=(1, 1))
    with pytest.raises(_native.StaleNativeModule, match=r"fakepkg\.pkg\.ext"):
        _native.guard(str(manifest))
    (source.parent / f"ext.{SO}").unlink()
    _native.guard(str(manifest))


def test_pure_at_run_time_does_not_import_a_c_extension(
    built_c: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, manifest = built_c
    monkeypatch.setenv("TXMQ_PURE", "1")
    before = list(sys.meta_path)
    sys.meta_path[:] = [f for f in before if not isinstance(f, _native._SourceOnly)]
    try:
        _native.guard(str(manifest))
        finder = sys.meta_path[0]
        assert isinstance(finder, _native._SourceOnly)
        with pytest.raises(ModuleNotFoundError, match="TXMQ_PURE=1"):
            finder.find_spec("fakepkg.pkg.ext")
    finally:
        sys.meta_path[:] = before


def test_the_c_extensions_are_in_the_build_and_its_check(tmp_path: Path) -> None:
    """setup.py builds and records the C extensions with the mypyc modules; `--check` (the Makefile's
    rebuild test) counts them: a manifest without them is not current."""
    assert set(build_native.C_MODULES) <= set(build_native.all_modules())
    for module in build_native.C_MODULES:
        assert build_native.source_path(module).suffix == ".c"
        assert build_native.source_path(module).is_file(), module
    text = build_native.manifest_for(build_native.all_modules())
    modules = [line.split("\t")[0] for line in text.splitlines() if not line.startswith("#")]
    assert modules == build_native.all_modules()
    found = _native.entries(str(_written(tmp_path, text)))
    assert {e.module for e in found} >= set(build_native.C_MODULES)


def _written(folder: Path, text: str) -> Path:
    path = folder / "_native_build.txt"
    path.write_text(text)
    return path


def test_no_manifest_means_nothing_compiled(tmp_path: Path) -> None:
    assert _native.entries(str(tmp_path / "missing.txt")) == []
    _native.guard(str(tmp_path / "missing.txt"))


def test_the_module_list_names_existing_sources() -> None:
    assert build_native.NATIVE_MODULES
    assert len(set(build_native.NATIVE_MODULES)) == len(build_native.NATIVE_MODULES)
    for module in build_native.NATIVE_MODULES:
        assert build_native.source_path(module).is_file(), module
        assert module != "txmq._native"  # the guard itself must stay pure


def test_the_manifest_round_trips(tmp_path: Path) -> None:
    """What setup.py writes is what the guard reads (same paths, sizes, hashes)."""
    text = build_native.manifest_for(build_native.NATIVE_MODULES[:2])
    path = tmp_path / "_native_build.txt"
    path.write_text(text)
    found = _native.entries(str(path))
    assert [e.module for e in found] == build_native.NATIVE_MODULES[:2]
    for entry in found:
        real = build_native.source_path(entry.module)
        assert entry.source == str(tmp_path / real.relative_to(build_native.SRC / "txmq"))
        assert entry.sha256 == build_native.digest(real)
        assert entry.size == real.stat().st_size


def test_this_tree_imports_what_its_build_says(tmp_path: Path) -> None:
    """Compiled tree: every listed module imports compiled, and from its .py under TXMQ_PURE=1."""
    if not _native.entries():
        pytest.skip("this tree is not compiled (pure Python)")
    script = (
        "import importlib, sys\n"
        "from txmq import native\n"
        "for m in native.compiled():\n"
        "    try:\n"
        "        print(m, importlib.import_module(m).__file__)\n"
        "    except ImportError:\n"
        "        print(m, 'not-importable')\n"
        "print(native.summary())\n"
    )
    for pure in (False, True):
        env = {k: v for k, v in subprocess_env(tmp_path).items() if k != "TXMQ_PURE"}
        if pure:
            env["TXMQ_PURE"] = "1"
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        files = dict(line.split(" ", 1) for line in out[:-1])
        assert set(files) == {e.module for e in _native.entries()}
        for module, file in files.items():
            if module in build_native.C_MODULES:  # a C extension: no .py to run, pure does without it
                assert (file == "not-importable") == pure, (module, file)
                continue
            assert file.endswith(".py") == pure, (module, file)
        assert ("pure (TXMQ_PURE=1)" in out[-1]) == pure
    assert native.summary().startswith(("native: mypyc", "native: pure"))
