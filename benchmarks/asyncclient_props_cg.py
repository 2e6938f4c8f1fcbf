"""Instructions per single-send header of a message with tags, keys and a user property (asyncclient).

``BinarySendHeaders.request`` (the SDK's per-message SEND_MESSAGE_V2 header on a ROCKETMQ channel)
``N`` times for one such message, in process, no socket. Under callgrind at two counts, per header =
(I(N2) - I(N1)) / (N2 - N1)::

    PYTHONPATH=SRC valgrind --tool=callgrind --callgrind-out-file=OUT \
        python benchmarks/asyncclient_props_cg.py N
"""

from __future__ import annotations

import sys

from txmq.client._single import BinarySendHeaders
from txmq.common.message import Message, MessageQueue


def main() -> None:
    n = int(sys.argv[1])
    headers = BinarySendHeaders()
    mq = MessageQueue("bench", 3, "broker-a")
    message = Message("bench", b"x" * 1024, tags="paid", keys=("order-17",), properties={"region": "eu"})
    request = headers.request
    total = 0
    for _ in range(n):
        total += len(request(mq, message, "bench-p0", 3)[0])
    print(total)


if __name__ == "__main__":
    main()
