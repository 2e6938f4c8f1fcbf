"""The broker's instructions per one-in-flight sync-flush send, in process, for callgrind (single1.md).

The single-1 shape without sockets or a client: a SYNC broker on a real directory (``$TMPDIR``: the
group commit's write and fdatasync are real system calls), one ``RemotingEndpoint`` with a sink
transport, and SEND_MESSAGE_V2 requests rendered as txmq's SDK renders a plain 1 KB message
(``benchmarks/sendcpu_cg.py``'s frames, ROCKETMQ header, one queue), one per ``data_received``,
each answered before the next is read (one message in flight). The whole round trip is counted:
frame decode, handler, append, flush step (write, fdatasync, completion), the answer's write, the
dispatch (ConsumeQueue unit, index entry), and the loop turns in between. The store's once-a-second
checkpoint task is cancelled unless ``--checkpoint`` (under callgrind the run is ~50x slower, so it
would count ~50x more checkpoints per message than a real run)::

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/x.out \\
        python benchmarks/single1_cg.py N

Per message = (I(N2) - I(N1)) / (N2 - N1) (the set-up cancels). Run it once without callgrind first
(it renders the frames into ``$TMPDIR/sendcpu-frames-rocketmq-N.bin``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sendcpu_cg import Sink, reads
from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint
from txmq.storage.api import FlushMode

TOPIC = "bench-topic"


async def run(n: int, checkpoint: bool) -> None:
    chunks = reads(n, 1, "rocketmq")
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.SYNC))
        # every fsync on the loop, as a lone producer's on an idle host: under callgrind the loop looks
        # busy and some groups would take the fsync thread, a different path from run to run
        broker.store.inline_sync_us_max = math.inf
        for task in broker.store._tasks:
            if task.get_name() == "txmq-store-checkpoint" and not checkpoint:
                task.cancel()
        broker.topics.create(TOPIC, queues=1)
        from txmq.server import runtime

        runtime.tune_gc()
        handler = make_handler(RemotingContext(broker, "127.0.0.1:10911"))
        endpoint = RemotingEndpoint(handler)
        sink = Sink()
        endpoint.connection_made(sink)
        for chunk in chunks:
            writes = sink.writes
            endpoint.data_received(chunk)
            while sink.writes == writes:  # one in flight: the next request waits for this answer
                await asyncio.sleep(0)
        await asyncio.sleep(0)
        dispatched = broker.store.max_offset(TOPIC, 0)
        await broker.close()
        print(f"{n} requests, {sink.written} response bytes in {sink.writes} writes, {dispatched} dispatched")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int)
    parser.add_argument("--checkpoint", action="store_true", help="keep the store's checkpoint task")
    args = parser.parse_args()
    import uvloop

    uvloop.run(run(args.n, args.checkpoint))


if __name__ == "__main__":
    main()
