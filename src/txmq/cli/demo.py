"""``txmq demo transfer``: the transfer demo (two banks, transactional messages, injected faults)."""

from __future__ import annotations

from typing import Annotated

import typer

demo_app = typer.Typer(help="Demos that show txmq's guarantees under faults.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(demo_app, name="demo")


@demo_app.command("transfer")
def transfer(
    data_dir: Annotated[
        str, typer.Option("--data-dir", help="broker store and bank databases")
    ] = "./demo-data",
    transfers: Annotated[int, typer.Option(help="how many transfers bank A makes")] = 200,
    seed: Annotated[int, typer.Option(help="chooses the transfers and the faults")] = 1,
    postgres: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL of a PostgreSQL database for both banks")
    ] = None,
    faults: Annotated[bool, typer.Option(help="inject faults")] = True,
    json_out: Annotated[bool, typer.Option("--json", help="print the figures as JSON")] = False,
) -> None:
    """Bank A debits and announces transfers transactionally; bank B credits them once; faults are
    injected; the invariants are checked at the end (exit 1 if one is broken)."""
    from txmq.demo.transfer import run_transfer_demo

    raise typer.Exit(run_transfer_demo(data_dir, transfers, seed, postgres, faults, json_out))
