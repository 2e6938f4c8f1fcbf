"""SDK overhead against raw protocol calls, on the remoting and the gRPC transport.

Starts a broker subprocess (async flush, so the store is not what is measured), then times, for N
messages each: (a) raw calls: SEND_MESSAGE_V2 requests over one ``RemotingChannel`` with hand-built
headers, or SendMessage calls on a bare ``MessagingServiceStub`` with hand-built v2 messages; one at a
time and pipelined (W in flight); (b) ``Producer.send`` one at a time and ``send_async`` with the same W
in flight on the matching transport. Prints messages/s and the SDK's overhead in percent.

    python benchmarks/sdk_bench.py [--messages 2000] [--window 64] [--transport remoting|grpc|both]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import grpc
from tests.client.broker import BrokerProcess

from txmq.client import Message, Producer
from txmq.client._remoting_channel import RemotingChannel
from txmq.common import msgid
from txmq.common import properties as props
from txmq.protocol.grpc import pb
from txmq.protocol.grpc.convert import set_timestamp
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.headers import SendMessageRequestHeaderV2


def _header(topic: str) -> dict[str, str]:
    properties = props.encode({props.UNIQ_KEY: msgid.new_message_id(int(time.time() * 1000))}).decode()
    return SendMessageRequestHeaderV2(
        producer_group="bench", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
        sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties=properties,
    ).to_ext_fields()  # fmt: skip


async def raw(broker: BrokerProcess, topic: str, n: int, window: int) -> float:
    channel = await RemotingChannel.open(broker.remoting)
    body = b"x" * 128
    start = time.perf_counter()
    if window == 1:
        for _ in range(n):
            await channel.request(RequestCode.SEND_MESSAGE_V2, _header(topic), body)
    else:
        sem = asyncio.Semaphore(window)

        async def one() -> None:
            async with sem:
                await channel.request(RequestCode.SEND_MESSAGE_V2, _header(topic), body)

        await asyncio.gather(*(one() for _ in range(n)))
    elapsed = time.perf_counter() - start
    await channel.close()
    return n / elapsed


def _v2_request(topic: str, body: bytes) -> object:
    message = pb.Message(body=body)
    message.topic.name = topic
    sysp = message.system_properties
    sysp.message_id = msgid.new_message_id(int(time.time() * 1000))
    sysp.body_encoding = pb.Encoding.IDENTITY
    sysp.message_type = pb.MessageType.NORMAL
    set_timestamp(sysp.born_timestamp, int(time.time() * 1000))
    sysp.born_host = "127.0.0.1"
    return pb.service.SendMessageRequest(messages=[message])


async def raw_grpc(broker: BrokerProcess, topic: str, n: int, window: int) -> float:
    """Bare stub calls with the three metadata headers: the floor any v2 client pays."""
    channel = grpc.aio.insecure_channel(broker.grpc)
    stub = pb.MessagingServiceStub(channel)
    metadata = (("x-mq-client-id", "bench@raw"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"))
    body = b"x" * 128

    async def one() -> None:
        response = await stub.SendMessage(_v2_request(topic, body), metadata=metadata, timeout=10)
        assert response.status.code == pb.Code.OK, response.status

    await one()
    start = time.perf_counter()
    if window == 1:
        for _ in range(n):
            await one()
    else:
        sem = asyncio.Semaphore(window)

        async def bounded() -> None:
            async with sem:
                await one()

        await asyncio.gather(*(bounded() for _ in range(n)))
    elapsed = time.perf_counter() - start
    await channel.close()
    return n / elapsed


async def sdk(broker: BrokerProcess, topic: str, n: int, window: int, transport: str = "remoting") -> float:
    endpoints = broker.namesrv if transport == "remoting" else broker.grpc
    async with Producer(endpoints, group="bench", max_in_flight=window, transport=transport) as producer:  # type: ignore[arg-type]
        await producer.send(Message(topic, b"warm"))
        msg = Message(topic, b"x" * 128)
        start = time.perf_counter()
        if window == 1:
            for _ in range(n):
                await producer.send(msg)
        else:
            futures = [await producer.send_async(msg) for _ in range(n)]
            await asyncio.gather(*futures)
        return n / (time.perf_counter() - start)


async def compare(broker: BrokerProcess, transport: str, n: int, window: int) -> None:
    raw_fn = raw if transport == "remoting" else raw_grpc
    for label, w in (("one at a time", 1), (f"{window} in flight", window)):
        # alternate and keep the best of two rounds each, so neither side pays for warm-up
        r1, s1 = await raw_fn(broker, "bench", n, w), await sdk(broker, "bench", n, w, transport)
        s2, r2 = await sdk(broker, "bench", n, w, transport), await raw_fn(broker, "bench", n, w)
        r, s = max(r1, r2), max(s1, s2)
        overhead = 100 * (r / s - 1)
        print(f"{transport:>8} {label:>14}: raw {r:8.0f}/s  sdk {s:8.0f}/s  overhead {overhead:5.1f}%")


async def main(n: int, window: int, transports: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), "--flush", "async")
        broker.start()
        try:
            async with Producer(broker.namesrv) as warm:
                await warm.send(Message("bench", b"warm"))
            for transport in transports:
                await compare(broker, transport, n, window)
        finally:
            broker.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--transport", choices=["remoting", "grpc", "both"], default="both")
    args = parser.parse_args()
    chosen = ["remoting", "grpc"] if args.transport == "both" else [args.transport]
    asyncio.run(main(args.messages, args.window, chosen))
