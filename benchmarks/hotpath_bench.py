"""Broker CPU per message on the remoting hot paths, without sockets: frame bytes in, response bytes out.

Each scenario feeds pre-encoded request frames through the broker's own connection state machine and
request handler (in-process ``Broker`` on a real store, ASYNC flush so no fsync is timed) and reports
the process CPU time per message, the best of ``--rounds`` rounds. On a shared, noisy machine this
is the figure that holds up: it is what caps the broker's throughput once the client and the disk
keep up.

    python benchmarks/hotpath_bench.py [--messages 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.integration.remoting_support import send_header  # noqa: E402

from txmq import native  # noqa: E402
from txmq.broker.broker import Broker  # noqa: E402
from txmq.broker.config import BrokerConfig  # noqa: E402
from txmq.protocol.remoting import frame  # noqa: E402
from txmq.protocol.remoting.codes import RequestCode  # noqa: E402
from txmq.protocol.remoting.command import make_request  # noqa: E402
from txmq.protocol.remoting.connection import RemotingConnection  # noqa: E402
from txmq.protocol.remoting.message_codec import BatchMessage, encode_batch  # noqa: E402
from txmq.server.remoting.context import RemotingContext  # noqa: E402
from txmq.server.remoting.dispatch import make_handler  # noqa: E402
from txmq.server.remoting_transport import RemotingEndpoint  # noqa: E402
from txmq.storage.api import FlushMode  # noqa: E402

BODY = os.urandom(512).hex().encode()  # 1 KB
QUEUES = 4


async def _serve(handler: object, endpoint: RemotingEndpoint, frames: list[bytes], inflight: int) -> int:
    """Decode every frame, run the handler (``inflight`` requests at once, as the transport runs
    pipelined requests as concurrent tasks), encode every response; returns response bytes."""
    conn = RemotingConnection()
    out = 0

    async def one(request: object) -> int:
        response = await handler(request, endpoint)  # type: ignore[operator]
        return len(frame.encode(response))

    for start in range(0, len(frames), inflight):
        requests = []
        for data in frames[start : start + inflight]:
            conn.receive_data(data)
            requests.append(conn.next_event())
        if inflight == 1:
            out += await one(requests[0])
        else:
            out += sum(await asyncio.gather(*(one(r) for r in requests)))
    return out


async def _measure(name: str, handler: object, endpoint: RemotingEndpoint, frames: list[bytes], per: int,
                   rounds: int, inflight: int = 1) -> None:  # fmt: skip
    best = float("inf")
    for _ in range(rounds):
        cpu = time.process_time()
        await _serve(handler, endpoint, frames, inflight)
        await asyncio.sleep(0)  # let the ASYNC group writes of this round run
        best = min(best, time.process_time() - cpu)
    print(f"{name:<34} {best / (len(frames) * per) * 1e6:8.1f} us CPU per message (best of {rounds})")


async def run(messages: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.ASYNC))
        ctx = RemotingContext(broker, "127.0.0.1:10911")
        handler = make_handler(ctx)
        endpoint = RemotingEndpoint()
        client = RemotingConnection()

        def request(code: int, fields: dict[str, str], body: bytes = b"") -> bytes:
            return frame.encode(make_request(code, client.new_request(code).opaque, fields, body))

        singles = [
            request(
                RequestCode.SEND_MESSAGE_V2,
                send_header("HotSingle", {"TAGS": "bench"}, queue_id=i % QUEUES),
                BODY,
            )
            for i in range(messages)
        ]
        await _measure("send, 1 in flight", handler, endpoint, singles, 1, rounds)
        await _measure("send, 64 in flight", handler, endpoint, singles, 1, rounds, inflight=64)
        batch_body = encode_batch([BatchMessage(BODY, {"TAGS": "bench"}) for _ in range(100)])
        batches = [
            request(
                RequestCode.SEND_BATCH_MESSAGE, send_header("HotBatch", {}, queue_id=i % QUEUES), batch_body
            )
            for i in range(max(1, messages // 100))
        ]
        await _measure("send, batches of 100", handler, endpoint, batches, 100, rounds)

        def pulls() -> list[bytes]:
            frames = []
            for queue in range(QUEUES):
                for offset in range(0, 2 * messages * rounds // QUEUES - 32, 32):
                    fields = {
                        "consumerGroup": "HotGroup", "topic": "HotSingle", "queueId": str(queue),
                        "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
                        "suspendTimeoutMillis": "0",
                    }  # fmt: skip
                    frames.append(request(RequestCode.PULL_MESSAGE, fields))
            return frames

        await _measure("pull, 32 per request", handler, endpoint, pulls(), 32, rounds)
        await broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(native.summary(), flush=True)
    import uvloop

    uvloop.install()
    asyncio.run(run(args.messages, args.rounds))


if __name__ == "__main__":
    main()
