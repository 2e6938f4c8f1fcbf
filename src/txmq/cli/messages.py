"""``txmq send`` and ``txmq consume``, built on the SDK: remoting (a name server, default) or gRPC (:8081)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Annotated, Any, Literal

import typer

from txmq.cli.common import duration_ms, fail
from txmq.common import errors

Endpoints = Annotated[
    str, typer.Option("--endpoints", help="name server host:port (remoting) or host:8081 (grpc)")
]
TransportOption = Annotated[
    str, typer.Option("--transport", help="remoting (through a name server) or grpc (v2 endpoint)")
]


def _transport(name: str) -> Literal["remoting", "grpc"]:
    if name not in ("remoting", "grpc"):
        fail(f"--transport must be remoting or grpc, not {name!r}")
    return "grpc" if name == "grpc" else "remoting"


def register(app: typer.Typer) -> None:
    app.command("send", help="Send messages (prints one result per message).")(send)
    app.command("consume", help="Consume messages of a topic as a group (prints them).")(consume)


def send(
    topic: Annotated[str, typer.Option(help="destination topic")],
    body: Annotated[str | None, typer.Option(help="message body text")] = None,
    file: Annotated[str | None, typer.Option(help="read the body from this file")] = None,
    tags: Annotated[str | None, typer.Option(help="the message tag")] = None,
    keys: Annotated[str | None, typer.Option(help="space-separated keys")] = None,
    count: Annotated[int, typer.Option(help="send the body this many times")] = 1,
    delay_level: Annotated[int | None, typer.Option("--delay-level", help="1..18")] = None,
    message_group: Annotated[str | None, typer.Option("--message-group", help="FIFO group")] = None,
    endpoints: Endpoints = "127.0.0.1:9876",
    transport: TransportOption = "remoting",
    json_out: Annotated[bool, typer.Option("--json", help="JSON lines")] = False,
) -> None:
    from txmq.client import Message, Producer

    kind = _transport(transport)
    if (body is None) == (file is None):
        fail("give exactly one of --body or --file")
    if count < 1:
        fail("--count must be at least 1")
    try:
        payload = body.encode("utf-8") if body is not None else open(file or "", "rb").read()  # noqa: SIM115
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")
    message = Message(
        topic=topic, body=payload, tags=tags, keys=tuple((keys or "").split()),
        delay_level=delay_level, message_group=message_group,
    )  # fmt: skip

    async def run() -> None:
        async with Producer(endpoints, transport=kind) as producer:
            for _ in range(count):
                result = await producer.send(message)
                row = {"message_id": result.message_id, "topic": result.queue.topic,
                       "queue_id": result.queue.queue_id, "queue_offset": result.queue_offset}  # fmt: skip
                print(
                    json.dumps(row) if json_out else " ".join(f"{k}={v}" for k, v in row.items()), flush=True
                )

    _run(run())


def consume(
    topic: Annotated[str, typer.Option(help="the topic to read")],
    group: Annotated[str, typer.Option(help="the consumer group")],
    tags: Annotated[str, typer.Option(help="tag expression: * or a || b")] = "*",
    count: Annotated[int, typer.Option(help="stop after this many messages (0: no limit)")] = 0,
    timeout: Annotated[str, typer.Option(help="stop when nothing arrived for this long")] = "10s",
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="new groups start at the beginning")
    ] = False,
    endpoints: Endpoints = "127.0.0.1:9876",
    transport: TransportOption = "remoting",
    json_out: Annotated[bool, typer.Option("--json", help="JSON lines")] = False,
) -> None:
    from txmq.client import ConsumeFrom, PullConsumer

    kind = _transport(transport)
    idle_s = duration_ms(timeout, "--timeout") / 1000
    start = ConsumeFrom.FIRST_OFFSET if from_beginning else ConsumeFrom.LAST_OFFSET

    async def run() -> None:
        seen = 0
        async with PullConsumer(group, endpoints, transport=kind, consume_from=start) as consumer:
            await consumer.subscribe(topic, tags)
            last = time.monotonic()
            while (count == 0 or seen < count) and time.monotonic() - last < idle_s:
                messages = await consumer.poll(timeout_s=min(1.0, idle_s))
                for message in messages[: (count - seen) if count else None]:
                    _print_message(message, json_out)
                    seen += 1
                if messages:
                    last = time.monotonic()
                    await consumer.commit()
            await consumer.commit()

    _run(run())


def _print_message(message: Any, json_out: bool) -> None:
    body = message.body.decode("utf-8", errors="replace")
    if json_out:
        row = {"message_id": message.message_id, "topic": message.topic, "queue_id": message.queue_id,
               "queue_offset": message.queue_offset, "tags": message.tags, "keys": list(message.keys),
               "body": body}  # fmt: skip
        print(json.dumps(row), flush=True)
    else:
        print(
            f"{message.queue_id}:{message.queue_offset} {message.message_id} "
            f"tags={message.tags or '-'} {body}",
            flush=True,
        )


def _run(coroutine: Any) -> None:
    try:
        asyncio.run(coroutine)
    except errors.TxmqError as exc:
        fail(exc.message)
    except KeyboardInterrupt:
        sys.exit(130)
