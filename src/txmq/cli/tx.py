"""``txmq tx list|show|resume|resolve``: pending half messages, their check history, discarded ones."""

from __future__ import annotations

from typing import Annotated

import typer

from txmq.cli.common import fail, print_json
from txmq.cli.topic import Endpoint, Json, run, table

tx_app = typer.Typer(
    help="Transactional (half) messages: list, show history, resume, resolve.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(tx_app, name="tx")


@tx_app.command("list")
def tx_list(
    limit: Annotated[int, typer.Option(help="at most this many rows")] = 1000,
    endpoint: Endpoint = "127.0.0.1:8081",
    json_out: Json = False,
) -> None:
    """Pending and discarded half messages with their age and delivered checks."""
    rows = run(endpoint, "tx.list", {"limit": limit})
    if json_out:
        print_json(rows)
        return
    for row in rows:
        row["age"] = f"{row['age_ms'] / 1000:.1f}s"
    table(rows, ["transaction_id", "topic", "producer_group", "state", "age", "checks"], "half messages")


@tx_app.command("show")
def tx_show(transaction_id: str, endpoint: Endpoint = "127.0.0.1:8081", json_out: Json = False) -> None:
    """A half message's state and its whole history of checks and decisions."""
    result = run(endpoint, "tx.show", {"id": transaction_id})
    if json_out:
        print_json(result)
        return
    print(
        f"{result['transaction_id']} message {result['message_id']} topic {result['topic']}: "
        f"{result['state']} after {result['checks']} checks"
    )
    table(result["history"], ["at_ms", "kind", "source", "decision", "client", "detail"], "history")


@tx_app.command("resume")
def tx_resume(transaction_id: str, endpoint: Endpoint = "127.0.0.1:8081", json_out: Json = False) -> None:
    """Re-arm a discarded half message: checks start again from zero."""
    result = run(endpoint, "tx.resume", {"id": transaction_id})
    print_json(result) if json_out else print(f"{transaction_id} resumed: {result['state']}")


@tx_app.command("resolve")
def tx_resolve(
    transaction_id: str,
    commit: Annotated[bool, typer.Option("--commit", help="deliver the message")] = False,
    rollback: Annotated[bool, typer.Option("--rollback", help="discard the message for good")] = False,
    endpoint: Endpoint = "127.0.0.1:8081",
    json_out: Json = False,
) -> None:
    """An operator's decision for a pending or discarded half message (the first decision still wins)."""
    if commit == rollback:
        fail("give exactly one of --commit or --rollback")
    result = run(endpoint, "tx.resolve", {"id": transaction_id, "commit": commit})
    print_json(result) if json_out else print(f"{transaction_id}: {result['state']}")
