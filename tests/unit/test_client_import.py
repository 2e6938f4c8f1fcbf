"""``import txmq.client`` stays light: SQLAlchemy is loaded only by the modules that use a database."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; {code}; print(' '.join(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return set(out.stdout.split())


def test_importing_the_sdk_does_not_load_sqlalchemy() -> None:
    assert "sqlalchemy" not in _modules_after("import txmq.client")


def test_deduplicator_is_still_importable_from_the_package() -> None:
    modules = _modules_after(
        "from txmq.client import Deduplicator; assert Deduplicator.__name__ == 'Deduplicator'"
    )
    assert "sqlalchemy" in modules


def test_unknown_names_still_raise_attribute_error() -> None:
    import txmq.client

    with pytest.raises(AttributeError, match="NoSuchThing"):
        txmq.client.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
