"""The ``txmq`` command: one Typer app with a sub-app per area (broker, store, topic, tx, ...)."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="txmq",
    help="txmq: a RocketMQ-compatible broker with transactional messages first.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    """Attach every sub-command module. Each module exposes ``register(app)``."""
    import importlib

    for name in ("store", "broker", "topic", "tx", "query", "messages", "demo", "bench", "pipeline"):
        try:
            module = importlib.import_module(f"txmq.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"txmq.cli.{name}":
                raise
            continue
        module.register(app)


def main() -> None:
    _register()
    app()


if __name__ == "__main__":
    main()
