"""The broker's instructions per single remoting send, in process, for callgrind (sendcpu.md).

The async-256 shape without sockets or a client: an ASYNC broker, one ``RemotingEndpoint`` with a
sink transport, and SEND_MESSAGE_V2 requests rendered exactly as txmq's SDK renders a plain message
(``client._single.BinarySendHeaders``, ROCKETMQ header, 1 KB body, one queue), ``--per-read`` frames
per ``data_received`` (as pipelined requests arrive; ``--keyless``: without their UNIQ_KEY, as
``remoting_bench.py`` and some 4.x clients send them); each read is answered before the next. The
frames are rendered once into a file (``$TMPDIR/sendcpu-frames-HEADER-N.bin``; run once without
callgrind first) so the SDK's rendering is not counted::

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/x.out \
        python benchmarks/sendcpu_cg.py N [--per-read 64] [--header json]

Per message = (I(N2) - I(N1)) / (N2 - N1) (the set-up cancels). ``--header json`` renders the SDK's
JSON header instead (``SendHeaders``), as a JSON client's requests. ``--readings-per-ms R``: the
broker's clock moves one millisecond every R readings (``StepClock``), as it does in a real run at
~30 us a message; under callgrind the system clock moves ~50x more often per message.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.client._single import BinarySendHeaders, SendHeaders
from txmq.common.clock import SystemClock
from txmq.common.message import Message, MessageQueue
from txmq.protocol.remoting.codes import RequestCode, SerializeType
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.connection import RemotingConnection
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint
from txmq.storage.api import FlushMode

TOPIC = "bench-topic"
BODY = b"x" * 1024


class Sink(asyncio.Transport):
    """Counts the bytes written to it (the responses)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.writes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _keyless(ext: dict[str, str], name: str) -> dict[str, str]:
    """``ext`` with the UNIQ_KEY pair taken out of its properties field ``name``."""
    pairs = [pair for pair in ext[name].split("\x02") if pair and not pair.startswith("UNIQ_KEY\x01")]
    return {**ext, name: "".join(f"{pair}\x02" for pair in pairs)}


def requests(n: int, header: str, keyless: bool = False) -> list[bytes]:
    """``n`` frames as the SDK sends a plain message to queue 0 of ``TOPIC`` (``keyless``: without
    its UNIQ_KEY, as some 4.x clients and ``remoting_bench.py`` send, the broker making the id)."""
    binary = header == "rocketmq"
    conn = RemotingConnection(serialize_type=SerializeType.ROCKETMQ if binary else SerializeType.JSON)
    mq = MessageQueue(TOPIC, 0, "broker-a")
    decoder = RemotingConnection()
    frames = []
    if binary:
        bin_headers = BinarySendHeaders()
        for _ in range(n):
            ext, body, _ = bin_headers.request(mq, Message(TOPIC, BODY), "bench-p0", 0)
            frame = conn.send_binary_request(RequestCode.SEND_MESSAGE_V2, ext, body)[1]
            if keyless:  # the SDK's frame as the broker reads it, re-rendered without the id
                decoder.receive_data(frame)
                request = decoder.next_event()
                assert isinstance(request, RemotingCommand)
                fields = _keyless(request.ext_fields, "i")
                frame = conn.send(conn.new_request(RequestCode.SEND_MESSAGE_V2, fields, request.body))
            frames.append(frame)
    else:
        json_headers = SendHeaders()
        for _ in range(n):
            text, body, _ = json_headers.request(mq, Message(TOPIC, BODY), "bench-p0", 0)
            frames.append(conn.send_json_request(RequestCode.SEND_MESSAGE_V2, text, body)[1])
    return frames


def reads(n: int, per_read: int, header: str, keyless: bool = False) -> list[bytes]:
    """The requests joined ``per_read`` to a read, rendered once into a file under the temp dir (so a
    measured run does not count the SDK's rendering)."""
    shape = "-keyless" if keyless else ""
    path = Path(tempfile.gettempdir()) / f"sendcpu-frames-{header}{shape}-{n}.bin"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_bytes(b"".join(requests(n, header, keyless)))
        tmp.replace(path)
    blob = path.read_bytes()
    out = []
    pos = 0
    while pos < len(blob):
        start = pos
        for _ in range(per_read):
            if pos >= len(blob):
                break
            pos += 4 + int.from_bytes(blob[pos : pos + 4], "big")
        out.append(blob[start:pos])
    return out


class StepClock(SystemClock):
    """Wall time that moves one millisecond every ``per_ms`` readings of ``now_ms``: a deterministic
    stand-in for the real clock (under callgrind the broker runs ~50x slower, so real milliseconds
    would pass ~50x more often per message than in a real run)."""

    def __init__(self, per_ms: int) -> None:
        self.per_ms = per_ms
        self.readings = 0
        self.start = super().now_ms()

    def now_ms(self) -> int:
        self.readings += 1
        return self.start + self.readings // self.per_ms


async def run(n: int, per_read: int, header: str, per_ms: int, keyless: bool = False) -> None:
    chunks = reads(n, per_read, header, keyless)
    clock = StepClock(per_ms) if per_ms else SystemClock()
    with tempfile.TemporaryDirectory() as tmp:
        broker = await Broker.open(BrokerConfig(data_dir=tmp, flush=FlushMode.ASYNC), clock=clock)
        broker.topics.create(TOPIC, queues=1)
        from txmq.server import runtime

        runtime.tune_gc()
        handler = make_handler(RemotingContext(broker, "127.0.0.1:10911"))
        endpoint = RemotingEndpoint(handler)
        sink = Sink()
        endpoint.connection_made(sink)
        for chunk in chunks:
            endpoint.data_received(chunk)
            while endpoint._deferred or endpoint._out or endpoint._tasks:
                await asyncio.sleep(0)
        await asyncio.sleep(0)
        await broker.close()
        readings = f", {clock.readings} clock readings" if isinstance(clock, StepClock) else ""
        print(f"{n} requests, {sink.written} response bytes in {sink.writes} writes{readings}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("n", type=int)
    parser.add_argument("--per-read", type=int, default=64)
    parser.add_argument("--header", choices=("rocketmq", "json"), default="rocketmq")
    parser.add_argument(
        "--readings-per-ms", type=int, default=0, help="a StepClock instead of the system clock (0: none)"
    )
    parser.add_argument(
        "--keyless", action="store_true", help="requests without UNIQ_KEY: the broker makes the ids"
    )
    args = parser.parse_args()
    if args.keyless and args.header != "rocketmq":
        parser.error("--keyless renders ROCKETMQ headers only")
    import uvloop

    uvloop.run(run(args.n, args.per_read, args.header, args.readings_per_ms, args.keyless))


if __name__ == "__main__":
    main()
