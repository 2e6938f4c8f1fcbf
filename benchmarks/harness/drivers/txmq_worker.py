"""A txmq producer in its own process, for workloads with several producers (tx-8).

Python runs one thread of bytecode per process, so eight producers in the harness process would share
one core of client work; a real deployment has eight producer processes. The parent (``TxmqDriver``)
starts one worker per producer and talks to it over stdin/stdout:

    worker -> parent   b"R" once the producer is started
    parent -> worker   b"S" u32 length + payload     one request: send this payload
    parent -> worker   b"G" u32 length + JSON        run a whole slot of the workload here (the runner's
                                                   own loop; no pipe round trip per request measured)
    worker -> parent   b"\\x00" | b"\\x01" u32 length + JSON outcome (G) / empty (S) | utf-8 error

    python -m benchmarks.harness.drivers.txmq_worker ENDPOINT TRANSPORT GROUP TRANSACTIONAL(0|1)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.harness.drivers.txmq import LENGTH, OK, READY, RUN, TOPIC, listener
from benchmarks.harness.runner import drive_slot
from benchmarks.harness.workload import Workload
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
    slot = _SdkSlot(producer)
    try:
        while True:
            try:
                kind = await reader.readexactly(1)
                (size,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
                body = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                return  # the parent closed our stdin: done
            try:
                answer = b""
                if kind == RUN:
                    answer = await _run(slot, json.loads(body))
                else:
                    await slot.send(0, [body])
            except Exception as exc:
                answer = f"{type(exc).__name__}: {exc}".encode()
                out.write(FAILED + LENGTH.pack(len(answer)) + answer)
            else:
                out.write(OK + LENGTH.pack(len(answer)) + answer)
            out.flush()
    finally:
        await producer.close()


class _SdkSlot:
    """The runner's view of this worker's SDK producer: one request is one message (tx-8: batch 1)."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    async def send(self, queue: int, payloads: Sequence[bytes]) -> None:
        producer = self._producer
        for payload in payloads:
            if isinstance(producer, TransactionProducer):
                await producer.send_message_in_transaction(Message(TOPIC, payload))
            else:
                await producer.send(Message(TOPIC, payload))

    async def close(self) -> None:
        await self._producer.close()


async def _run(slot: _SdkSlot, order: dict[str, Any]) -> bytes:
    outcome = await drive_slot(
        slot, Workload(**order["workload"]), order["first_queue"], order["measure_from"], order["deadline"],
        order["interval_ns"],
    )  # fmt: skip
    return json.dumps(dataclasses.asdict(outcome)).encode()


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
