"""``txmq topic create|list|describe|delete`` and ``txmq group list|describe|reset-offset``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from txmq.cli.admin_client import call
from txmq.cli.common import fail, print_json
from txmq.common import errors

Endpoint = Annotated[str, typer.Option("--endpoint", "-e", help="the broker's gRPC address")]
Json = Annotated[bool, typer.Option("--json", help="print JSON")]

topic_app = typer.Typer(help="Create, list and describe topics.", no_args_is_help=True)
group_app = typer.Typer(help="Consumer groups: list, describe, reset offsets.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(topic_app, name="topic")
    app.add_typer(group_app, name="group")


def run(endpoint: str, op: str, args: dict[str, Any]) -> Any:
    try:
        return call(endpoint, op, args)
    except errors.TxmqError as exc:
        fail(exc.message)


def table(rows: list[dict[str, Any]], columns: list[str], title: str) -> None:
    view = Table(title=title)
    for column in columns:
        view.add_column(column)
    for row in rows:
        view.add_row(*(str(row.get(c, "")) for c in columns))
    Console().print(view)


@topic_app.command("create")
def topic_create(
    name: str,
    queues: Annotated[int | None, typer.Option(help="queue count (default: the broker's)")] = None,
    message_type: Annotated[
        str, typer.Option("--type", help="NORMAL, FIFO, DELAY, TRANSACTION or MIXED")
    ] = "MIXED",
    endpoint: Endpoint = "127.0.0.1:8081",
    json_out: Json = False,
) -> None:
    """Create a topic, or update one (its queue count can grow, never shrink)."""
    result = run(endpoint, "topic.create", {"name": name, "queues": queues, "message_type": message_type})
    print_json(result) if json_out else print(
        f"topic {result['name']}: {result['queues']} queues, {result['message_type']}"
    )


@topic_app.command("list")
def topic_list(
    system: Annotated[bool, typer.Option(help="include system topics")] = False,
    endpoint: Endpoint = "127.0.0.1:8081",
    json_out: Json = False,
) -> None:
    """Topics with their queue count, message type and permissions."""
    result = run(endpoint, "topic.list", {"system": system})
    print_json(result) if json_out else table(result, ["name", "queues", "message_type", "perm"], "topics")


@topic_app.command("describe")
def topic_describe(name: str, endpoint: Endpoint = "127.0.0.1:8081", json_out: Json = False) -> None:
    """A topic's settings and, per queue, its minimum and maximum offsets."""
    result = run(endpoint, "topic.describe", {"name": name})
    if json_out:
        print_json(result)
        return
    print(
        f"topic {result['name']}: {result['queues']} queues, {result['message_type']}, perm {result['perm']}"
    )
    table(result["queue_offsets"], ["queue_id", "min_offset", "max_offset"], "queues")


@topic_app.command("delete")
def topic_delete(name: str, endpoint: Endpoint = "127.0.0.1:8081") -> None:
    """Remove a topic from the registry (messages already stored stay in the commit log)."""
    run(endpoint, "topic.delete", {"name": name})
    print(f"topic {name} deleted")


@group_app.command("list")
def group_list(endpoint: Endpoint = "127.0.0.1:8081", json_out: Json = False) -> None:
    """Consumer groups the broker knows, with their messages in flight (received, not yet acked)."""
    result = run(endpoint, "group.list", {})
    print_json(result) if json_out else table(result, ["group", "inflight"], "groups")


@group_app.command("describe")
def group_describe(group: str, endpoint: Endpoint = "127.0.0.1:8081", json_out: Json = False) -> None:
    """A group's connected clients and, per queue, its committed offset, the queue's end and the lag."""
    result = run(endpoint, "group.describe", {"group": group})
    if json_out:
        print_json(result)
        return
    print(f"group {group}: {result['inflight']} in flight, clients: {', '.join(result['clients']) or '-'}")
    table(result["queues"], ["topic", "queue_id", "offset", "max_offset", "lag"], "offsets")


@group_app.command("reset-offset")
def group_reset(
    group: str,
    topic: Annotated[str, typer.Option(help="the topic whose offsets move")],
    to: Annotated[str, typer.Option(help="beginning, end or timestamp")] = "end",
    timestamp_ms: Annotated[int, typer.Option("--timestamp-ms")] = 0,
    endpoint: Endpoint = "127.0.0.1:8081",
    json_out: Json = False,
) -> None:
    """Move a group's offsets on a topic to the beginning, the end, or the first message at a timestamp."""
    result = run(
        endpoint,
        "group.reset_offset",
        {"group": group, "topic": topic, "to": to, "timestamp_ms": timestamp_ms},
    )
    print_json(result) if json_out else print(f"group {group} on {topic} reset: {result}")
