"""The two databases the transaction table and the consumer dedup are tested on: SQLite and PostgreSQL.

PostgreSQL is the machine's service at 127.0.0.1:5432 (trust auth, database ``test``); when it cannot be
reached the PostgreSQL half of a test is skipped with the reason, the SQLite half still runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"

# The fixture parameters: each test runs on both, PostgreSQL carrying the `postgres` marker.
ENGINE_KINDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def open_engine(
    kind: str, tmp_path: Path, *, file_name: str, sqlite_timeout_s: float, pool_size: int
) -> Engine:
    """An engine of `kind`: a fresh SQLite file under `tmp_path`, or the local PostgreSQL (skip if down)."""
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / file_name}"
        return sa.create_engine(url, connect_args={"timeout": sqlite_timeout_s})
    engine = sa.create_engine(PG_URL, pool_size=pool_size)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
    except sa_exc.OperationalError as exc:
        engine.dispose()
        pytest.skip(f"PostgreSQL at {PG_URL} is unreachable: {exc.orig}")
    return engine
