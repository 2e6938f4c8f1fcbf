"""A half message appended as record fields is the record the PutRequest path built.

``SendService.half_append`` (the remoting door, and ``send`` for one transactional message) builds
the half's ``RecordFields`` itself instead of a ``PutRequest`` the store converts: for generated
transactional messages (tags, keys, user properties, delays, check immunity, groups) its fields and
properties equal what ``prepare`` (``_prepare`` + ``_half``) and the store's conversion give.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.broker.send import SendContext
from txmq.common.clock import FakeClock
from txmq.common.message import Message
from txmq.storage.api import FlushMode, RecordFields
from txmq.storage.store import MessageStore

_TEXT = st.text(alphabet=st.sampled_from("ab |-_é"), min_size=0, max_size=6)
_IDS = itertools.count(1)


@pytest.fixture(scope="module")
def broker(loop: asyncio.AbstractEventLoop) -> Iterator[Broker]:
    clock = FakeClock(start_ms=1_800_000_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        config = BrokerConfig(data_dir=str(Path(tmp) / "d"), flush=FlushMode.ASYNC)
        opened = loop.run_until_complete(Broker.open(config, clock=clock))
        yield opened
        loop.run_until_complete(opened.close())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.sampled_from([b"x", b"body" * 64, bytes(range(256))]),
    tags=st.sampled_from([None, "t", "tag-1"]),
    keys=st.sampled_from([(), ("k1",), ("k1", "k2")]),
    user=st.dictionaries(st.sampled_from(["a", "b", "user.x", "WAIT"]), _TEXT, max_size=3),
    delay=st.sampled_from([0, 0, 2]),
    deliver_in_ms=st.sampled_from([None, None, 5_000]),
    immunity=st.sampled_from([None, 30]),
    group=st.sampled_from(["PG", ""]),
    host=st.sampled_from(["10.0.0.1:4242", "[::1]:4242"]),
    queue_id=st.sampled_from([0, 3]),
)
def test_half_fields_are_the_prepared_request_as_stored(
    broker: Broker,
    loop: asyncio.AbstractEventLoop,
    body: bytes,
    tags: str | None,
    keys: tuple[str, ...],
    user: dict[str, str],
    delay: int,
    deliver_in_ms: int | None,
    immunity: int | None,
    group: str,
    host: str,
    queue_id: int,
) -> None:
    now = broker.clock.now_ms()
    message = Message(
        topic="HalfFields", body=body, tags=tags, keys=keys, properties=user, transactional=True,
        delay_level=delay or None, check_immunity_s=immunity, message_id=f"ID{next(_IDS):032X}",
        delivery_timestamp_ms=None if deliver_in_ms is None or delay else now + deliver_in_ms,
    )  # fmt: skip
    ctx = SendContext(producer_group=group or None, born_host=host, queue_id=queue_id)
    _, request = broker.sender.prepare(message, ctx)
    expected_topic, expected = MessageStore.fields_of(request)

    async def append() -> tuple[RecordFields, dict[str, str]]:
        half = broker.sender.half_append(message, ctx, False)
        await half.durable
        return half.fields, half.properties

    fields, properties = loop.run_until_complete(append())
    assert expected_topic == "RMQ_SYS_TRANS_HALF_TOPIC"
    assert fields == expected
    assert type(fields.sys_flag) is int and fields.sys_flag == expected.sys_flag
    assert properties == broker.sender._prepare(message, ctx)[2]
