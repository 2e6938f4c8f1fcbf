"""Helpers shared by CLI commands: one-line failures, JSON output, durations."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

from txmq.common.durations import parse_duration_ms


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def duration_ms(text: str, option: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        fail(f"{option}: {exc}")


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))
