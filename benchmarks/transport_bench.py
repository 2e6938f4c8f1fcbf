"""Broker CPU per request through the real remoting transport, without sockets.

Pre-encoded request frames go into a broker ``RemotingEndpoint``'s ``data_received`` (``--per-read``
requests a read, as a pipelining client's bytes arrive), and the run waits until every response
was written to a sink transport. Unlike ``hotpath_bench.py``, whose loop stands in for the transport,
this times the transport's own request path (decode, dispatch, tasks, response encode, writes) with
the broker's handler on a real store (ASYNC flush). Reports the best of ``--rounds`` process-CPU
figures per message.

    python benchmarks/transport_bench.py [--messages 4096] [--rounds 5] [--src OTHER/src]
        [--only send,batch] [--profile /tmp/prof] [--untuned-gc]

Scenarios: single sends (``send``), batches of 100 (``batch``, SEND_BATCH_MESSAGE), GET_MAX_OFFSET,
pulls of 32, transactions (``tx``: half sends, then their END_TRANSACTION commits, each step timed).
The broker's collector is set as a broker process sets it (``runtime.tune_gc``) unless
``--untuned-gc`` or the measured ``src`` has no such function.

``--src`` measures another checkout's ``src`` (a baseline) with this same script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class Sink(asyncio.Transport):
    """A write-only transport that counts the response frames written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.frames = 0
        self.failed = 0  # responses whose code is not SUCCESS
        self._pending = b""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        buf = self._pending + bytes(data)
        pos = 0
        while len(buf) - pos >= 4:
            (length,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos < 4 + length:
                break
            if b'"code":0,' not in buf[pos + 8 : pos + 24]:
                self.failed += 1
            pos += 4 + length
            self.frames += 1
        self._pending = buf[pos:]

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def run(
    messages: int,
    rounds: int,
    per_read: int,
    only: set[str],
    profile: str,
    untuned: bool,
    header: str = "json",
) -> None:
    from tests.integration.remoting_support import send_header

    from txmq.broker.broker import Broker
    from txmq.broker.config import BrokerConfig
    from txmq.protocol.remoting import frame
    from txmq.protocol.remoting.codes import RequestCode, SerializeType
    from txmq.protocol.remoting.command import make_request
    from txmq.protocol.remoting.message_codec import BatchMessage, encode_batch
    from txmq.server.remoting.context import RemotingContext
    from txmq.server.remoting.dispatch import make_handler
    from txmq.server.remoting_transport import RemotingEndpoint
    from txmq.storage.api import FlushMode

    body = os.urandom(512).hex().encode()  # 1 KB
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.ASYNC))
        from txmq.server import runtime

        tune_gc = getattr(
            runtime, "tune_gc", None
        )  # the broker process's collector settings, if the src has them
        if tune_gc is not None and not untuned:
            tune_gc()
        handler = make_handler(RemotingContext(broker, "127.0.0.1:10911"))
        opaque = 0

        def request(code: int, fields: dict[str, str], payload: bytes = b"") -> bytes:
            nonlocal opaque
            opaque += 1
            serialize_type = SerializeType.ROCKETMQ if header == "rocketmq" else SerializeType.JSON
            return frame.encode(make_request(code, opaque, fields, payload, serialize_type=serialize_type))

        async def measure(name: str, frames: list[bytes], per_message: int) -> None:
            if only and name.split(",")[0].split(" ")[0] not in only:
                return
            profiler = None
            if profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            best = float("inf")
            for _ in range(rounds):
                endpoint = RemotingEndpoint(handler)
                sink = Sink()
                endpoint.connection_made(sink)
                reads = [b"".join(frames[i : i + per_read]) for i in range(0, len(frames), per_read)]
                cpu = time.process_time()
                expected = 0
                for i, data in enumerate(reads):
                    expected += min(per_read, len(frames) - i * per_read)
                    endpoint.data_received(data)
                    while sink.frames < expected:
                        await asyncio.sleep(0)
                best = min(best, time.process_time() - cpu)
                if sink.failed:
                    print(f"{name}: {sink.failed} responses were not SUCCESS")
                await asyncio.sleep(0)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(f"{profile}.{name.split(',')[0].split(' ')[0]}")
            print(f"{name:<40} {best / (len(frames) * per_message) * 1e6:8.1f} us CPU per message")

        sends = [
            request(
                RequestCode.SEND_MESSAGE_V2, send_header("TSend", {"TAGS": "bench"}, queue_id=i % 4), body
            )
            for i in range(messages)
        ]
        await measure(f"send, {per_read} per read", sends, 1)
        batch_body = encode_batch([BatchMessage(body, {"TAGS": "bench"}) for _ in range(100)])
        batches = [
            request(
                RequestCode.SEND_BATCH_MESSAGE,
                send_header("TBatch", {"TAGS": "bench"}, queue_id=i % 4),
                batch_body,
            )
            for i in range(max(4, messages // 100))
        ]
        await measure(f"batch of 100, {per_read} per read", batches, 100)
        queries = [
            request(RequestCode.GET_MAX_OFFSET, {"topic": "TSend", "queueId": str(i % 4)})
            for i in range(messages)
        ]
        await measure(f"GET_MAX_OFFSET, {per_read} per read", queries, 1)
        pulls = [
            request(
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "TGroup",
                    "topic": "TSend",
                    "queueId": str(i % 4),
                    "queueOffset": str(32 * (i // 4) % max(32, messages * rounds // 4 - 32)),
                    "maxMsgNums": "32",
                    "sysFlag": "0",
                    "commitOffset": "0",
                    "suspendTimeoutMillis": "0",
                },
            )
            for i in range(max(4, messages // 32))
        ]
        await measure(f"pull 32, {per_read} per read", pulls, 32)
        if not only or "tx" in only:
            await transactions(broker, handler, request, body, messages, rounds, per_read, profile)
        await broker.close()


async def transactions(
    broker: Any,
    handler: Any,
    request: Any,
    body: bytes,
    messages: int,
    rounds: int,
    per_read: int,
    profile: str,
) -> None:
    """``tx``: half sends (SEND_MESSAGE_V2, transactional, as txmq's SDK sends them), then their
    END_TRANSACTION commits (answered requests), ``messages`` of each per round; best CPU per message
    of each step, and of the two together (the broker's CPU per committed transaction)."""
    from tests.integration.remoting_support import send_header

    from txmq.common import msgid, names
    from txmq.common import properties as props
    from txmq.protocol.remoting.codes import RequestCode
    from txmq.protocol.remoting.headers import EndTransactionRequestHeader
    from txmq.server.remoting_transport import RemotingEndpoint

    async def feed(frames: list[bytes]) -> float:
        endpoint = RemotingEndpoint(handler)
        sink = Sink()
        endpoint.connection_made(sink)
        reads = [b"".join(frames[i : i + per_read]) for i in range(0, len(frames), per_read)]
        cpu = time.process_time()
        expected = 0
        for i, data in enumerate(reads):
            expected += min(per_read, len(frames) - i * per_read)
            endpoint.data_received(data)
            while sink.frames < expected:
                await asyncio.sleep(0)
        spent = time.process_time() - cpu
        if sink.failed:
            print(f"tx: {sink.failed} responses were not SUCCESS")
        return spent

    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    best_half = best_end = best_both = float("inf")
    next_half = broker.store.max_offset(names.HALF_TOPIC, 0)
    for _ in range(rounds):
        halves = []
        for i in range(messages):
            properties = {
                props.UNIQ_KEY: msgid.new_message_id(int(time.time() * 1000)),
                props.TRAN_MSG: "true",
                props.PRODUCER_GROUP: "PG",
            }
            fields = send_header("TTx", properties, queue_id=i % 4, sys_flag=4)  # TRANSACTION_PREPARED
            halves.append(request(RequestCode.SEND_MESSAGE_V2, fields, body))
        half_cpu = await feed(halves)
        units = []
        while len(units) < messages:  # queue_units answers at most a chunk at a time
            chunk = broker.store.queue_units(names.HALF_TOPIC, 0, next_half, messages - len(units))
            if not chunk:
                raise RuntimeError("a half message is missing from the half queue")
            units += chunk
            next_half += len(chunk)
        ends = []
        for unit in units:
            half = broker.store.read(unit.physical_offset)
            decoded = props.decode(half.properties)
            header = EndTransactionRequestHeader(
                producer_group="PG", tran_state_table_offset=unit.queue_offset,
                commit_log_offset=unit.physical_offset, commit_or_rollback=8, msg_id=decoded[props.UNIQ_KEY],
                topic="TTx", from_transaction_check=False,
                transaction_id=broker.transactions.transaction_id_of(unit.physical_offset),
            )  # fmt: skip
            ends.append(request(RequestCode.END_TRANSACTION, header.to_ext_fields()))
        end_cpu = await feed(ends)
        best_half, best_end = min(best_half, half_cpu), min(best_end, end_cpu)
        best_both = min(best_both, half_cpu + end_cpu)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(f"{profile}.tx")
    for name, best in (("half send", best_half), ("END_TRANSACTION commit", best_end), ("both", best_both)):
        print(f"{'tx ' + name + f', {per_read} per read':<40} {best / messages * 1e6:8.1f} us CPU per tx")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-read", type=int, default=64)
    parser.add_argument("--src", default=str(ROOT / "src"), help="the txmq sources to measure")
    parser.add_argument(
        "--only", default="", help="scenarios by first word: send,batch,GET_MAX_OFFSET,pull,tx"
    )
    parser.add_argument("--profile", default="", help="cProfile each scenario into PROFILE.<scenario>")
    parser.add_argument("--untuned-gc", action="store_true", help="keep CPython's collector defaults")
    parser.add_argument(
        "--header", choices=("json", "rocketmq"), default="json",
        help="the requests' header serialization (txmq's SDK: rocketmq; 4.x clients: json)",
    )  # fmt: skip
    args = parser.parse_args()
    sys.path.insert(0, args.src)
    sys.path.insert(0, str(ROOT))
    import uvloop

    uvloop.install()
    only = set(args.only.split(",")) if args.only else set()
    asyncio.run(
        run(args.messages, args.rounds, args.per_read, only, args.profile, args.untuned_gc, args.header)
    )


if __name__ == "__main__":
    main()
