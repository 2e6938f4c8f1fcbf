"""Every ```python block of docs/sdk/*.md runs against a real broker (NAMESRV, GRPC, TOPIC, GROUP set)."""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path

import pytest

from tests.client.broker import BrokerProcess

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sdk"
BLOCKS = [
    pytest.param(block, id=f"{page.stem}-{i}")
    for page in sorted(DOCS.glob("*.md"))
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
]


@pytest.mark.parametrize("code", BLOCKS)
async def test_doc_example_runs(code: str, broker: BrokerProcess, unique: str) -> None:
    source = "async def __example():\n" + textwrap.indent(code, "    ")
    namespace: dict[str, object] = {"asyncio": asyncio, "NAMESRV": broker.namesrv, "TOPIC": f"doc{unique}"}
    namespace["GROUP"] = f"docg{unique}"
    namespace["GRPC"] = broker.grpc
    exec(compile(source, "<doc>", "exec"), namespace)
    await asyncio.wait_for(namespace["__example"](), 60)  # type: ignore[operator]
