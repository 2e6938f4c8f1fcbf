"""CPU per message of the gRPC door's proxy checks (``protocol/grpc/checks.check_lean``), the only work
the field fixes added to the send path: ``PYTHONPATH=src python benchmarks/grpc_checks_cost.py``."""

from __future__ import annotations

import time

from txmq.common.message import LeanMessage
from txmq.protocol.grpc import checks

_BODY = b"x" * 1024
_PLAIN = LeanMessage(_BODY, {}, "TagA", ("order-1",), "01ID", None)
_FULL = LeanMessage(_BODY, {"k": "v", "k2": "v2"}, "TagA", ("order-1",), "01ID", "group-7")
CASES = (
    ("one message: tag + key", [_PLAIN], 200_000),
    ("one message: tag + key + group + 2 properties", [_FULL], 200_000),
    ("batch of 100: tag + key", [_PLAIN] * 100, 2_000),
)


def main() -> None:
    for name, lean, calls in CASES:
        started = time.process_time()
        for _ in range(calls):
            checks.check_lean(lean)
        spent = time.process_time() - started
        print(f"{name}: {spent / calls / len(lean) * 1e9:.0f} ns CPU per message")


if __name__ == "__main__":
    main()
