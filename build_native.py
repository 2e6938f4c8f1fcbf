"""The one list of txmq modules compiled with mypyc, and the build manifest that guards them.

``setup.py`` compiles :data:`NATIVE_MODULES` with mypyc and the C extensions of :data:`C_MODULES`
(unless ``TXMQ_PURE=1``, no compiler, or mypyc fails: then txmq stays pure Python) and writes
``src/txmq/_native_build.txt``: for every compiled module its source's (``.py`` or ``.c``) size,
mtime and SHA-256. ``txmq._native`` reads it at ``import txmq`` and refuses to run
a compiled module whose ``.py`` changed since the build (Python would import the stale ``.so``).

``python build_native.py --check`` exits 0 when the in-place build is current (same module list,
same sources, every ``.so`` present) and 1 otherwise; the Makefile rebuilds on 1.
``python build_native.py --clean`` removes every compiled artefact from ``src/``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SRC = ROOT / "src"
MANIFEST = SRC / "txmq" / "_native_build.txt"
GROUP = "txmq_native"  # the shared library: src/txmq_native__mypyc.<abi>.so

# Chosen by profile and A/B measurement (benchmarks/results/mypyc.md). Add a module only if mypyc
# compiles it unchanged in behaviour and a benchmark shows the gain; exclude rather than contort.
# Excluded: protocol.remoting.headers (its field table reads typing.get_type_hints, and mypyc erases
# `str | None` annotations of compiled dataclasses to `type`); server.grpc_server and
# server.grpc_decode (their streaming handlers are async generators, which mypyc does not compile).
# The SDK's producer path (client._window/_producer/_transaction/_remoting: benchmarks/results/
# sdkmypyc.md) is compiled; its public classes Producer and TransactionProducer carry
# @mypyc_attr(allow_interpreted_subclasses=True) so users may still subclass them. Not compiled (not
# measured on a hot path, or consumer-side): client._transport, _pull, _push, _grpc*.
NATIVE_MODULES: list[str] = [
    "txmq.protocol.remoting.frame",
    "txmq.protocol.remoting.command",
    "txmq.protocol.remoting.connection",
    "txmq.protocol.remoting.message_codec",
    "txmq.protocol.remoting.send_header",
    "txmq.storage.codec",
    "txmq.storage.commitlog",
    "txmq.storage.consume_queue",
    "txmq.storage.index",
    "txmq.storage.dispatch",
    "txmq.storage.flush",
    "txmq.storage.osfile",
    "txmq.storage.store",
    "txmq.broker.send",
    "txmq.broker.records",
    "txmq.broker.pop",
    "txmq.broker.reput",
    "txmq.broker.transaction.model",
    "txmq.broker.transaction.history",
    "txmq.broker.transaction.decide",
    "txmq.broker.transaction.rounds",
    "txmq.broker.transaction.service",
    "txmq.protocol.grpc.checks",
    "txmq.protocol.grpc.convert",
    "txmq.protocol.grpc.wire",
    "txmq.server.remoting.convert",
    "txmq.server.remoting.producer",
    "txmq.server.remoting.consumer",
    "txmq.server.remoting.dispatch",
    "txmq.server.remoting.context",
    "txmq.server.remoting_transport",
    "txmq.client._remoting_channel",
    "txmq.client._remoting_convert",
    "txmq.client._single",
    "txmq.client._window",
    "txmq.client._producer",
    "txmq.client._transaction",
    "txmq.client._remoting",
    "txmq.common.message",
    "txmq.common.properties",
    "txmq.common.msgid",
    "txmq.common.completion",
    "txmq.common.clock",
    "txmq.spark.rows",
]

# Hand-written C extensions built beside the mypyc ones (same fate: no compiler or a failing build
# leaves pure Python, whose code is the reference they are tested against). Module -> its C source,
# relative to src/. Recorded in the same manifest: a changed .c is a stale build, as a changed .py is.
C_MODULES: dict[str, str] = {
    "txmq.storage._batchenc": "txmq/storage/_batchenc.c",  # batched append: encode, CRC32C, key digests
    # a plain SEND_BATCH_MESSAGE body straight into the send lane's columns
    "txmq.server.remoting._lanescan": "txmq/server/remoting/_lanescan.c",
    # a plain gRPC SendMessageRequest straight into the send lane's columns
    "txmq.protocol.grpc._sendscan": "txmq/protocol/grpc/_sendscan.c",
    # a ROCKETMQ header's extFields map, common field names interned
    "txmq.protocol.remoting._hdrmap": "txmq/protocol/remoting/_hdrmap.c",
    # a remoting pull body's records straight into MessageView objects (the SDK's pull)
    "txmq.client._pullviews": "txmq/client/_pullviews.c",
    # the SDK batch send's loops: its messages checked, its SendResult objects made
    "txmq.client._batchsend": "txmq/client/_batchsend.c",
    # a slotted instance made with its slots set (the SDK's views, results, END refs: fastinit.slot_maker)
    "txmq.common._slots": "txmq/common/_slots.c",
    # the permissive gRPC front's joined connections relayed by two threads without the GIL
    "txmq.server._relaypump": "txmq/server/_relaypump.c",
}


def all_modules() -> list[str]:
    """Every module of a compiled build: the mypyc ones and the C extensions."""
    return NATIVE_MODULES + list(C_MODULES)


def source_path(module: str) -> Path:
    if module in C_MODULES:
        return SRC.joinpath(*C_MODULES[module].split("/"))
    return SRC.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_for(modules: list[str]) -> str:
    """The manifest text: one line per module, tab-separated (read by ``txmq._native.entries``)."""
    lines = ["# module\tpath\tsize\tmtime_ns\tsha256 (written by setup.py; see build_native.py)"]
    for module in modules:
        path = source_path(module)
        st = path.stat()
        rel = path.relative_to(SRC / "txmq").as_posix()
        lines.append(f"{module}\t{rel}\t{st.st_size}\t{st.st_mtime_ns}\t{digest(path)}")
    return "\n".join(lines) + "\n"


def recorded_modules() -> dict[str, str]:
    """module -> sha256 from the manifest of the in-place build; empty if there is none."""
    try:
        text = MANIFEST.read_text()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            fields = line.split("\t")
            found[fields[0]] = fields[4]
    return found


def artefacts() -> list[Path]:
    """Every compiled file under src/ (extension modules of txmq and the shared library)."""
    found = [p for p in (SRC / "txmq").rglob("*.so") if p.is_file()]
    found += [p for p in (SRC / "txmq").rglob("*.pyd") if p.is_file()]
    found += [p for p in SRC.glob(f"{GROUP}__mypyc*") if p.is_file()]
    return found


def clean() -> None:
    for path in artefacts():
        path.unlink()
    MANIFEST.unlink(missing_ok=True)


def is_current() -> tuple[bool, str]:
    if os.environ.get("TXMQ_PURE") == "1":
        return True, "TXMQ_PURE=1: pure Python wanted"
    try:
        first = MANIFEST.read_text().partition("\n")[0]
    except OSError:
        first = ""
    if first.startswith("# pure:"):
        return True, f"the last build fell back to pure Python ({first[8:]}); --clean to retry"
    recorded = recorded_modules()
    if not recorded:
        return False, "no build manifest"
    if sorted(recorded) != sorted(all_modules()):
        return False, "the module list changed"
    for module, entry in recorded.items():
        path = source_path(module)
        if not path.exists() or digest(path) != entry:
            return False, f"{module}: source changed since the build"
        if not [p for p in path.parent.glob(path.stem + ".*") if p.suffix in (".so", ".pyd")]:
            return False, f"{module}: compiled file missing"
    return True, "compiled modules are current"


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        ok, why = is_current()
        print(f"txmq native build: {why}")
        return 0 if ok else 1
    if argv == ["--clean"]:
        clean()
        return 0
    if argv == ["--list"]:
        print("\n".join(all_modules()))
        return 0
    print("usage: build_native.py --check | --clean | --list", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
