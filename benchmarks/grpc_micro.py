"""In-process timings of the gRPC door's per-message Python work, for A/B between checkouts.

Run it once per checkout (``PYTHONPATH=<checkout>/src python benchmarks/grpc_micro.py``): each figure is
the best of ``--repeat`` timed loops (µs per message; 1 KB bodies), which survives a shared machine's
noise far better than the end-to-end ``grpc_bench.py``:

* ``to_lean``: ``convert.to_lean`` over a parsed 100-message SendMessageRequest;
* ``parse+to_lean``: the same from the request's bytes (``SendMessageRequest.FromString`` first), and
  ``send_lane``: ``wire.send_lane`` from the same bytes (where the checkout has it: what the door runs
  since, compiled);
* ``send reply``: the SendMessage reply for 100 results, serialized (``wire.send_reply`` where the
  checkout has it, else the protobuf reply the door filled before);
* ``read_queue``: ``MessageStore.read_queue`` of 256 stored records (the read every receive does);
* ``receive+to_wire``: ``Broker.receive`` of 1024 + the response bytes per message (``wire.delivered``
  where the checkout has it, else ``convert.to_wire`` + ``SerializeToString``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.send import SendContext
from txmq.common.clock import SystemClock
from txmq.common.message import LeanMessage
from txmq.protocol.grpc import convert, pb
from txmq.storage.api import FlushMode

S = pb.service
BODY = os.urandom(512).hex().encode()


def best(fn: Callable[[], int], loops: int, repeat: int) -> float:
    """µs per item of ``fn`` (which returns how many items it handled), best of ``repeat``."""
    fn()
    result = float("inf")
    for _ in range(repeat):
        start = time.thread_time()  # CPU time: a loaded machine delays the thread, not its work
        items = sum(fn() for _ in range(loops))
        result = min(result, (time.thread_time() - start) / items * 1e6)
    return result


def _request_bytes() -> bytes:
    messages = []
    for i in range(100):
        message = pb.Message(body=BODY)
        message.topic.name = "T"
        sysp = message.system_properties
        sysp.tag, sysp.born_host, sysp.message_id = "bench", "127.0.0.1", f"01BENCH{i:025d}"
        sysp.body_encoding, sysp.message_type = pb.Encoding.IDENTITY, pb.MessageType.NORMAL
        convert.set_timestamp(sysp.born_timestamp, 1_800_000_000_000)
        messages.append(message)
    return bytes(S.SendMessageRequest(messages=messages).SerializeToString())


def _reply(results: list[Any]) -> bytes:
    try:
        from txmq.protocol.grpc import wire
    except ImportError:  # a checkout before wire.py: the reply as SendMessage filled it then
        reply = S.SendMessageResponse()
        reply.status.CopyFrom(convert.OK_STATUS)
        add, ok = reply.entries.add, convert.OK_STATUS
        for r in results:
            add(status=ok, message_id=r.message_id, transaction_id=r.transaction_id or "",
                offset=r.queue_offset, recall_handle=r.recall_handle or "")  # fmt: skip
        return bytes(reply.SerializeToString())
    return wire.send_reply(results)


def _sync(coro: Any) -> Any:
    """Run a coroutine that never suspends (a receive with nothing to wait for) to its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the receive waited")


async def run(args: argparse.Namespace) -> None:
    loops, repeat = args.loops, args.repeat
    data = _request_bytes()
    request = S.SendMessageRequest.FromString(data)
    lean = best(lambda: len(convert.to_lean(request.messages)[1]), loops, repeat)
    print(f"to_lean            {lean:6.2f} us/msg")
    parsed = best(
        lambda: len(convert.to_lean(S.SendMessageRequest.FromString(data).messages)[1]), loops, repeat
    )
    print(f"parse+to_lean      {parsed:6.2f} us/msg")
    from txmq.protocol.grpc import wire

    send_lane = getattr(wire, "send_lane", None)
    if send_lane is not None:
        print(f"send_lane          {best(lambda: len(send_lane(data)[1]), loops, repeat):6.2f} us/msg")
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.ASYNC), clock=SystemClock())
        ctx = SendContext(born_host="127.0.0.1", client_id="micro")
        results = []
        for i in range(0, args.messages, 100):
            batch = [LeanMessage(BODY, {}, "bench", (), f"01BENCH{i + j:025d}", None) for j in range(100)]
            results = await broker.send_lean("T", batch, ctx)
        reply = best(lambda: len(_reply(results)) and len(results), loops, repeat)
        print(f"send reply         {reply:6.2f} us/msg")
        await asyncio.sleep(0.5)  # dispatched: every message readable
        store = broker.store
        queue = max(range(8), key=lambda q: store.max_offset("T", q))
        reads = max(1, loops // 10)
        read = best(lambda: len(store.read_queue("T", queue, 0, 256).records), reads, repeat)
        print(f"read_queue         {read:6.2f} us/msg")
        groups = [f"g{n}" for n in range(repeat + 1)]
        for group in groups:  # a group's first receive registers it: not part of the timing
            _sync(broker.receive(group=group, topic="T", expression="*", batch_size=1,
                                 invisible_ms=300_000, long_poll_ms=0))  # fmt: skip
        fresh = iter(groups)

        from txmq.protocol.grpc import wire

        encode = getattr(wire, "delivered", None)  # the door's bytes since it exists

        def receive() -> int:
            views = _sync(broker.receive(group=next(fresh), topic="T", expression="*", batch_size=1024,
                                         invisible_ms=300_000, long_poll_ms=0))  # fmt: skip
            for view in views:
                if encode is not None:
                    encode(view, 300_000)
                    continue
                delivered = S.ReceiveMessageResponse()
                convert.to_wire(view, invisible_ms=300_000, into=delivered.message)
                delivered.SerializeToString()
            return len(views)

        print(f"receive+to_wire    {best(receive, 1, repeat):6.2f} us/msg")
        await broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--loops", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--messages", type=int, default=20_000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
