"""``txmq query --key K | --id ID``: find messages through the broker's key index."""

from __future__ import annotations

from typing import Annotated

import typer

from txmq.cli.common import fail, print_json
from txmq.cli.topic import Endpoint, Json, run, table


def register(app: typer.Typer) -> None:
    app.command("query", help="Find messages by key or by message id.")(query)


def query(
    key: Annotated[
        str | None, typer.Option("--key", help="a message key (KEYS) or client message id")
    ] = None,
    message_id: Annotated[str | None, typer.Option("--id", help="a message id")] = None,
    topic: Annotated[str | None, typer.Option(help="only this topic")] = None,
    endpoint: Endpoint = "127.0.0.1:8081",
    json_out: Json = False,
) -> None:
    if (key is None) == (message_id is None):
        fail("give exactly one of --key or --id")
    if key is not None:
        rows = run(endpoint, "query.key", {"key": key, "topic": topic})
    else:
        rows = [run(endpoint, "query.id", {"id": message_id})]
    if json_out:
        print_json(rows)
        return
    table(rows, ["message_id", "topic", "queue_id", "queue_offset", "tags", "keys", "body_bytes"], "messages")
