"""txmq: a RocketMQ-compatible message broker, Python SDK and PySpark pipeline.

Importing ``txmq`` is cheap: the client SDK is loaded lazily on first attribute access
(``txmq.Producer``), so ``import txmq`` never pulls in gRPC or the broker.
"""

from __future__ import annotations

from typing import Any

from txmq._native import guard as _guard_native

__version__ = "0.1.0"

_guard_native()  # refuses stale mypyc-compiled modules; TXMQ_PURE=1 ignores compiled ones

_LAZY_MODULE = "txmq.client"


def __getattr__(name: str) -> Any:
    import importlib

    module = importlib.import_module(_LAZY_MODULE)
    if name in getattr(module, "__all__", ()):
        return getattr(module, name)
    raise AttributeError(f"module 'txmq' has no attribute {name!r}")
