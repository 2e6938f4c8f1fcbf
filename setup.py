"""txmq's build: pure Python, plus its hot modules compiled with mypyc when that works.

The module list lives in ``build_native.py``. ``TXMQ_PURE=1`` skips compiling; no C compiler, or
mypyc failing, falls back to pure Python with a one-line message. Either way the package works.
"""

from __future__ import annotations

import os
import sys
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_native as bn

# Stands for the mypyc extensions until build_ext runs: mypyc type-checks and generates C, which
# must not happen for every metadata query pip makes (egg_info, get_requires, ...).
_PLACEHOLDER = Extension("txmq._native_placeholder", sources=[])


def _say(message: str) -> None:
    print(f"txmq: {message}", file=sys.stderr, flush=True)


class BuildNative(build_ext):
    def finalize_options(self) -> None:
        self._manifest: str | None = None
        self._pure_reason = ""
        exts = self.distribution.ext_modules or []
        if any(ext is _PLACEHOLDER for ext in exts):
            self.distribution.ext_modules = self._native_extensions()
        super().finalize_options()

    def _native_extensions(self) -> list[Extension]:
        if os.environ.get("TXMQ_PURE") == "1":
            _say("TXMQ_PURE=1: pure Python build, nothing compiled")
            return []
        try:
            from mypyc.build import mypycify
        except ImportError as exc:
            return self._pure(f"mypyc unavailable ({exc})")
        started = time.monotonic()
        self._manifest = bn.manifest_for(bn.all_modules())  # the sources about to be compiled
        paths = [os.path.relpath(bn.source_path(m), bn.ROOT) for m in bn.NATIVE_MODULES]
        try:
            exts = mypycify(paths, opt_level="3", group_name=bn.GROUP)
        except (Exception, SystemExit) as exc:  # noqa: BLE001  (any failure: pure; mypyc uses sys.exit)
            return self._pure(f"mypyc failed ({str(exc).strip()[:200]})")
        _say(f"mypyc generated C for {len(paths)} modules in {time.monotonic() - started:.1f} s")
        for module, rel in bn.C_MODULES.items():  # the hand-written C extensions, built with them
            exts.append(Extension(module, sources=[os.path.join("src", *rel.split("/"))]))
        return exts

    def _pure(self, reason: str) -> list[Extension]:
        _say(f"{reason}: pure Python build (TXMQ_PURE=1 skips the attempt)")
        self._manifest = None
        self._pure_reason = reason.replace("\n", " ")
        return []

    def run(self) -> None:
        inplace = self.inplace or getattr(self, "editable_mode", False)
        if inplace:
            bn.clean()  # no stale extension or manifest survives a rebuild, whatever it compiles
        if not self.extensions:
            if inplace and self._pure_reason:  # `build_native.py --check` then does not retry each time
                bn.MANIFEST.write_text(f"# pure: {self._pure_reason}\n")
            return
        started = time.monotonic()
        try:
            super().run()
        except (Exception, SystemExit) as exc:  # noqa: BLE001  (no compiler, compile or link error)
            if inplace:
                bn.clean()
            self.extensions = []
            self._pure(f"compiling the mypyc modules failed ({str(exc).strip()[:200]})")
            if inplace:
                bn.MANIFEST.write_text(f"# pure: {self._pure_reason}\n")
            return
        target = bn.MANIFEST if inplace else os.path.join(self.build_lib, "txmq", bn.MANIFEST.name)
        with open(target, "w") as out:
            out.write(self._manifest or "")
        _say(f"compiled {len(bn.all_modules())} modules (mypyc and C) in {time.monotonic() - started:.1f} s")


setup(ext_modules=[_PLACEHOLDER], cmdclass={"build_ext": BuildNative})
