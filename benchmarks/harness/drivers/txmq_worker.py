"""A txmq producer in its own process, for workloads with several producers (tx-8).

Python runs one thread of bytecode per process, so eight producers in the harness process would share
one core of client work; a real deployment has eight producer processes. The parent (``TxmqDriver``)
starts one worker per producer and talks to it over stdin/stdout:

    worker -> parent   b"R" once the producer is started
    parent -> worker   u32 length + payload          one request: send this payload
    worker -> parent   b"\\x00" | b"\\x01" u32 length + utf-8 error

    python -m benchmarks.harness.drivers.txmq_worker ENDPOINT TRANSPORT GROUP TRANSACTIONAL(0|1)
"""

from __future__ import annotations

import asyncio
import sys

from benchmarks.harness.drivers.txmq import LENGTH, OK, READY, TOPIC, listener
from txmq.client import Message, Producer, TransactionProducer

FAILED = b"\x01"


async def _serve(endpoint: str, transport: str, group: str, transactional: bool) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    out = sys.stdout.buffer
    producer: Producer
    if transactional:
        producer = TransactionProducer(group, listener(), endpoint, transport=transport)  # type: ignore[arg-type]
    else:
        producer = Producer(endpoint, group=group, transport=transport)  # type: ignore[arg-type]
    await producer.start()
    out.write(READY)
    out.flush()
    try:
        while True:
            try:
                (size,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
                payload = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                return  # the parent closed our stdin: done
            try:
                if isinstance(producer, TransactionProducer):
                    await producer.send_message_in_transaction(Message(TOPIC, payload))
                else:
                    await producer.send(Message(TOPIC, payload))
            except Exception as exc:
                text = f"{type(exc).__name__}: {exc}".encode()
                out.write(FAILED + LENGTH.pack(len(text)) + text)
            else:
                out.write(OK)
            out.flush()
    finally:
        await producer.close()


def main() -> None:
    endpoint, transport, group, transactional = sys.argv[1:5]
    serve = _serve(endpoint, transport, group, transactional == "1")
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve)
    else:
        uvloop.run(serve)


if __name__ == "__main__":
    main()
