"""The broker's instructions per committed transaction, in process, for callgrind (results/txcpu/).

tx-8's shape without sockets or clients: a SYNC broker on a real directory (``$TMPDIR``: the group
commit's write and fdatasync are real system calls, inline on the loop), ``--producers K`` remoting
connections (a ``RemotingEndpoint`` each, with a sink transport), and each producer doing what txmq's
``TransactionProducer`` does over remoting, one transaction at a time: a half send (SEND_MESSAGE_V2, a
transactional 1 KB message, ROCKETMQ header, as ``client._single.BinarySendHeaders`` renders it), and
once its answer is in, the oneway END_TRANSACTION commit for it (``client._remoting._end_binary``)
sharing one read with the producer's next half (the SDK's channel writes a oneway END with the next
request). The whole work is counted: frame decode, the half lane, the appends, the flush steps (write,
fdatasync, completion), the answers' writes, END_TRANSACTION's decision (committed message and op
record in one append), the dispatch (ConsumeQueue units, index entries) and the loop turns between.
The run ends once every committed message is dispatched to the topic's queue. The store's
once-a-second checkpoint task is cancelled unless ``--checkpoint``::

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/x.out \\
        python benchmarks/txcpu_cg.py N [--producers K]

Per transaction = (I(N2) - I(N1)) / (N2 - N1) (the set-up cancels). The frames are rendered once into
``$TMPDIR/txcpu-frames-N-K.pickle`` by a first run without callgrind, which runs the transactions
against a broker and builds each END_TRANSACTION from its half's answer as the SDK does (so the
SDK's work is not counted in a measured run); a measured run replays them and checks that every
answer is byte for byte the one recorded (the same log offsets, transaction ids and queue offsets), so
a branch whose records differ from the base's fails here instead of being measured on other work.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint
from txmq.storage.api import FlushMode

TOPIC = "bench-tx"
GROUP = "bench-tx-pg"
BODY = b"x" * 1024


class Sink(asyncio.Transport):
    """Keeps the bytes written to it (the answers), counts the whole frames among them and sets
    ``answered`` when one is complete."""

    def __init__(self, answered: asyncio.Event) -> None:
        super().__init__()
        self.data = bytearray()
        self.frames = 0
        self._next = 0  # where the next frame starts in ``data``
        self.answered = answered

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data
        while len(self.data) >= self._next + 4:
            end = self._next + 4 + int.from_bytes(self.data[self._next : self._next + 4], "big")
            if end > len(self.data):
                break
            self._next = end
            self.frames += 1
            self.answered.set()

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Renderer:
    """Producer ``p``'s reads built as txmq's SDK builds its requests: the half frames, and each
    END_TRANSACTION from its half's answer (``send_result``, ``half_view``, ``ref_of``, ``_end_binary``)."""

    def __init__(self, producers: int) -> None:
        from txmq.client._single import BinarySendHeaders
        from txmq.common.message import MessageQueue
        from txmq.protocol.remoting.codes import SerializeType
        from txmq.protocol.remoting.connection import RemotingConnection

        self.headers = BinarySendHeaders()
        self.mq = MessageQueue(TOPIC, 0, "broker-a")
        self.conns = [RemotingConnection(serialize_type=SerializeType.ROCKETMQ) for _ in range(producers)]
        self.sent: list[list[tuple[Any, str]]] = [[] for _ in range(producers)]  # (message, id) per half
        self.seen = [0] * producers  # answer bytes of producer p decoded so far

    def half(self, p: int) -> bytes:
        from txmq.common.message import Message
        from txmq.protocol.remoting.codes import RequestCode

        message = Message(TOPIC, BODY, transactional=True)
        ext, body, message_id = self.headers.request(self.mq, message, GROUP, 0)
        self.sent[p].append((message, message_id))
        return self.conns[p].send_binary_request(RequestCode.SEND_MESSAGE_V2, ext, body)[1]

    def end(self, p: int, i: int, answers: bytearray) -> bytes:
        from txmq.client import _single as single
        from txmq.client._remoting import _end_binary
        from txmq.client._transaction import half_view, ref_of
        from txmq.protocol.remoting.codes import RequestCode
        from txmq.protocol.remoting.connection import NEED_DATA, Response

        conn = self.conns[p]
        conn.receive_data(bytes(answers[self.seen[p] :]))
        self.seen[p] = len(answers)
        event = conn.next_event()
        if not isinstance(event, Response) or conn.next_event() is not NEED_DATA:
            raise RuntimeError(f"producer {p}: expected one answer, got {event!r}")
        message, message_id = self.sent[p][i]
        half = single.send_result(self.mq, message_id, event.command)
        if not half.transaction_id:
            raise RuntimeError(f"producer {p}: half {i} was answered without a transaction id")
        ref = ref_of(half_view(message, half), half)
        return conn.send_binary_oneway(RequestCode.END_TRANSACTION, _end_binary(ref, GROUP, True, False))


async def run(n: int, producers: int, checkpoint: bool) -> None:
    path = Path(tempfile.gettempdir()) / f"txcpu-frames-{n}-{producers}.pickle"
    recorded: dict[str, Any] | None = None
    if path.exists():
        recorded = pickle.loads(path.read_bytes())
    renderer = Renderer(producers) if recorded is None else None
    counts = [n // producers + (1 if p < n % producers else 0) for p in range(producers)]
    # chunks[p][i]: the i-th read of producer p (half 0; END i-1 + half i; the last END alone)
    chunks: list[list[bytes]] = recorded["chunks"] if recorded is not None else [[] for _ in range(producers)]
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.SYNC))
        # every fsync on the loop: under callgrind the loop looks busy and some groups would take the
        # fsync thread, a different path from run to run
        broker.store.inline_sync_us_max = math.inf
        for task in broker.store._tasks:
            if task.get_name() == "txmq-store-checkpoint" and not checkpoint:
                task.cancel()
        broker.topics.create(TOPIC, queues=1)
        from txmq.server import runtime

        runtime.tune_gc()
        handler = make_handler(RemotingContext(broker, "127.0.0.1:10911"))
        endpoints = [RemotingEndpoint(handler) for _ in range(producers)]
        answered = asyncio.Event()
        sinks = [Sink(answered) for _ in range(producers)]
        for endpoint, sink in zip(endpoints, sinks, strict=True):
            endpoint.connection_made(sink)

        def chunk(p: int, i: int) -> bytes:
            if renderer is not None:
                parts = [] if i == 0 else [renderer.end(p, i - 1, sinks[p].data)]
                if i < counts[p]:
                    parts.append(renderer.half(p))
                chunks[p].append(b"".join(parts))
            return chunks[p][i]

        fed = [0] * producers
        for p in range(producers):
            if counts[p]:
                endpoints[p].data_received(chunk(p, 0))
                fed[p] = 1
        while True:
            answered.clear()
            for p in range(producers):
                # one half in flight per producer: its answer sends the END and the next half
                if fed[p] <= counts[p] and sinks[p].frames == fed[p]:
                    endpoints[p].data_received(chunk(p, fed[p]))
                    fed[p] += 1
            if broker.store.max_offset(TOPIC, 0) >= n:
                break
            if any(fed[p] <= counts[p] for p in range(producers)):
                # an answer to wait for: the loop sleeps in its poll meanwhile (a fsync or a zero-fill
                # on the store's thread), where spinning would count instructions by wall time
                await answered.wait()
            else:
                await asyncio.sleep(0)  # the last commits, answered by nothing: until dispatched
        await asyncio.sleep(0)
        dispatched = broker.store.max_offset(TOPIC, 0)
        await broker.close()
    answers = [bytes(sink.data) for sink in sinks]
    if recorded is None:
        tmp_path = path.with_suffix(f".{os.getpid()}")
        tmp_path.write_bytes(pickle.dumps({"chunks": chunks, "answers": answers}))
        tmp_path.replace(path)
        print(f"rendered {path}")
    elif answers != recorded["answers"]:
        raise SystemExit("the answers differ from the recorded ones: the frames do not fit this broker")
    answered = sum(sink.frames for sink in sinks)
    print(f"done: {n} transactions, {producers} producers, {answered} answers, {dispatched} committed")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int, help="transactions")
    parser.add_argument("--producers", type=int, default=1, help="producers, one transaction in flight each")
    parser.add_argument("--checkpoint", action="store_true", help="keep the store's checkpoint task")
    args = parser.parse_args()
    import uvloop

    uvloop.run(run(args.n, args.producers, args.checkpoint))


if __name__ == "__main__":
    main()
