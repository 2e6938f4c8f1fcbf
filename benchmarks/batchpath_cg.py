"""The broker's instructions per message of a remoting SEND_BATCH_MESSAGE, in process, for callgrind.

The ``batch-100`` shape (issue 8) without sockets or a client: a SYNC broker on a real directory
(``$TMPDIR``: the group commit's write and fdatasync are real system calls), one ``RemotingEndpoint``
with a sink transport, and SEND_BATCH_MESSAGE requests of ``--batch`` (100) x 1 KB plain messages
rendered exactly as txmq's SDK renders ``Producer.send_batch([Message(topic, payload), ...],
queue=mq)`` (``RemotingTransport._send_request``: fresh message ids, the producer group as a
property, ROCKETMQ header, one queue), one request per ``data_received``, each answered before the
next is read (one batch in flight, as the harness's batch-100 runs it). The whole round trip is
counted: frame decode, the batch body's decode, the send lane, the append and encode, the flush
step (write, fdatasync, completion), the answer's write, the dispatch (ConsumeQueue units, index
entries), and the loop turns in between. The store's once-a-second checkpoint task is cancelled
(under callgrind the run is ~50x slower: it would count ~50x more checkpoints per message)::

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/x.out \\
        python benchmarks/batchpath_cg.py N

Per message = (I(N2) - I(N1)) / ((N2 - N1) x 100) (the set-up cancels). Run it once without
callgrind first: it renders the frames into ``$TMPDIR/batchpath-frames-B-N.bin`` (the SDK's
rendering is not counted). ``benchmarks/batchpath_cg.sh`` wraps the callgrind run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sendcpu_cg import Sink
from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common.message import Message, MessageQueue
from txmq.protocol.remoting.codes import SerializeType
from txmq.protocol.remoting.connection import RemotingConnection
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint
from txmq.storage.api import FlushMode

TOPIC = "bench-topic"
PAYLOAD = b"x" * 1024
GROUP = "bench-p0"


def requests(n: int, batch: int) -> list[bytes]:
    """``n`` SEND_BATCH_MESSAGE frames of ``batch`` plain messages each to queue 0 of ``TOPIC``, as the
    SDK's ``send_batch`` renders them on a ROCKETMQ channel."""
    from txmq.client._remoting import RemotingTransport

    transport = RemotingTransport("127.0.0.1:9876")
    conn = RemotingConnection(serialize_type=SerializeType.ROCKETMQ)
    mq = MessageQueue(TOPIC, 0, "broker-a")
    frames = []
    for _ in range(n):
        messages = [Message(TOPIC, PAYLOAD) for _ in range(batch)]
        code, ext, body, _ = transport._send_request(mq, messages, GROUP, mq.queue_id)
        frames.append(conn.send(conn.new_request(code, ext, body)))
    return frames


def frames(n: int, batch: int) -> list[bytes]:
    """The requests, rendered once into a file under the temp dir, one frame per read."""
    path = Path(tempfile.gettempdir()) / f"batchpath-frames-{batch}-{n}.bin"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_bytes(b"".join(requests(n, batch)))
        tmp.replace(path)
    blob = path.read_bytes()
    out = []
    pos = 0
    while pos < len(blob):
        end = pos + 4 + int.from_bytes(blob[pos : pos + 4], "big")
        out.append(blob[pos:end])
        pos = end
    return out


async def run(n: int, batch: int) -> None:
    chunks = frames(n, batch)
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.SYNC))
        # every fsync on the loop: under callgrind the loop looks busy and some groups would take
        # the fsync thread, a different path from run to run
        broker.store.inline_sync_us_max = math.inf
        for task in broker.store._tasks:
            if task.get_name() == "txmq-store-checkpoint":
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
            while sink.writes == writes:  # one batch in flight: the next waits for this answer
                await asyncio.sleep(0)
        await asyncio.sleep(0)
        stored = broker.store.max_offset(TOPIC, 0)
        await broker.close()
        answers = f"{sink.written} response bytes in {sink.writes} writes"
        print(f"{n} batches of {batch}, {answers}, {stored} stored")
        if stored != n * batch:
            raise SystemExit(f"expected {n * batch} messages stored, found {stored}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int, help="batches")
    parser.add_argument("--batch", type=int, default=100, help="messages per batch")
    args = parser.parse_args()
    import uvloop

    uvloop.run(run(args.n, args.batch))


if __name__ == "__main__":
    main()
