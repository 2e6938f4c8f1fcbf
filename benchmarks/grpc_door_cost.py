"""The gRPC door's own per-message pieces in process, for instruction counts (callgrind).

``piece`` is one of:

* ``send_lane``: ``wire.send_lane`` over ``grpc_bench.py``'s SendMessageRequest (1 KB bodies, tag, born
  host and time, message id) of COUNT messages;
* ``check_lean``: ``checks.check_lean`` of those decoded messages;
* ``lane_reply``: ``wire.lane_reply`` of COUNT message ids and consecutive queue offsets;
* ``door``: the three in a row, what the door does per request besides the broker's send.

Instructions per message = (run of N2 rounds - run of N1 rounds) / ((N2 - N1) x COUNT), so start-up and
imports cancel out::

    for n in 200 1200; do PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/dc.$n.out \\
        python benchmarks/grpc_door_cost.py send_lane $n 100; done

Without valgrind it prints CPU µs per message.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpc_decode_cost import request

from txmq.protocol.grpc import checks, wire


def main() -> None:
    piece, rounds = sys.argv[1], int(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    data = request(count)
    decoded = wire.send_lane(data)
    if decoded is None:
        raise SystemExit("the request was declined")
    lean = decoded[1]
    ids = [m.message_id or "" for m in lean]
    offsets = list(range(1_000_000, 1_000_000 + count))
    fn: Any
    if piece == "send_lane":
        fn = lambda: wire.send_lane(data)  # noqa: E731
    elif piece == "check_lean":
        fn = lambda: checks.check_lean(lean)  # noqa: E731
    elif piece == "lane_reply":
        fn = lambda: wire.lane_reply(ids, offsets)  # noqa: E731
    elif piece == "door":

        def fn() -> Any:
            got = wire.send_lane(data)
            assert got is not None
            checks.check_lean(got[1])
            return wire.lane_reply(ids, offsets)

    else:
        raise SystemExit(f"unknown piece {piece}")
    start = time.process_time()
    for _ in range(rounds):
        fn()
    print(f"{piece}: {(time.process_time() - start) / rounds / count * 1e6:.3f} us CPU per message")


if __name__ == "__main__":
    main()
