"""Half messages and END_TRANSACTION pipelined through the real remoting transport on loopback, with an
in-process broker on a FaultyFileSystem (ASYNC flush: acknowledged once written): many decisions in flight
together, decisions on one half taken one at a time, and a failed decision write that applies nothing."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator

import pytest

from tests.integration.remoting_support import Door, in_process_door, send_header
from txmq.common import msgid
from txmq.common import properties as props
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RequestCode,
    ResponseCode,
)
from txmq.protocol.remoting.command import RemotingCommand, make_request
from txmq.protocol.remoting.headers import EndTransactionRequestHeader
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import Deferred, RemotingEndpoint

GROUP = "PG"


@pytest.fixture
async def door() -> AsyncIterator[Door]:
    async with in_process_door() as made:
        yield made


def half_header(topic: str, uniq: str, keys: str = "") -> dict[str, str]:
    properties = {props.TRAN_MSG: "true", props.UNIQ_KEY: uniq}
    if keys:
        properties[props.KEYS] = keys
    return send_header(topic, properties, sys_flag=TRANSACTION_PREPARED_TYPE, group=GROUP)


def end_header(topic: str, uniq: str, half: RemotingCommand, decision: int) -> dict[str, str]:
    txid = half.ext_fields["transactionId"]
    parsed = msgid.parse_offset_message_id(txid)
    assert parsed is not None
    return EndTransactionRequestHeader(
        producer_group=GROUP, tran_state_table_offset=0, commit_log_offset=parsed[2],
        commit_or_rollback=decision, msg_id=uniq, topic=topic, transaction_id=txid,
    ).to_ext_fields()  # fmt: skip


async def halves(door: Door, topic: str, count: int) -> list[RemotingCommand]:
    replies = await asyncio.gather(
        *(
            door.client.request_nowait(RequestCode.SEND_MESSAGE_V2, half_header(topic, f"u{i}"), b"b%d" % i)
            for i in range(count)
        )
    )
    assert [r.code for r in replies] == [ResponseCode.SUCCESS] * count
    return replies


def bodies(door: Door, topic: str) -> list[bytes]:
    return [r.body for r in door.broker.store.read_queue(topic, 0, 0, 1000).records]


async def test_pipelined_decisions_commit_exactly_the_committed_halves(door: Door) -> None:
    sent = await halves(door, "TxPipe", 60)
    ends = [
        door.client.request_nowait(
            RequestCode.END_TRANSACTION,
            end_header("TxPipe", f"u{i}", h, TRANSACTION_COMMIT_TYPE if i % 3 else TRANSACTION_ROLLBACK_TYPE),
        )
        for i, h in enumerate(sent)
    ]
    replies = await asyncio.gather(*ends)
    assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 60
    assert bodies(door, "TxPipe") == [b"b%d" % i for i in range(60) if i % 3]
    states = {door.broker.transactions.show(h.ext_fields["transactionId"])["state"] for h in sent}
    assert door.broker.transactions.list_pending() == []
    assert states == {"COMMITTED", "ROLLED_BACK"}


async def test_decisions_on_one_half_in_flight_together_are_taken_one_at_a_time(door: Door) -> None:
    (half,) = await halves(door, "TxRace", 1)
    oneway = end_header("TxRace", "u0", half, TRANSACTION_COMMIT_TYPE)
    # the same turn: a oneway commit, a duplicate commit and a rollback, all before any is durable
    assert door.client.oneway(RequestCode.END_TRANSACTION, oneway)
    again = door.client.request_nowait(RequestCode.END_TRANSACTION, oneway)
    rollback = door.client.request_nowait(
        RequestCode.END_TRANSACTION, end_header("TxRace", "u0", half, TRANSACTION_ROLLBACK_TYPE)
    )
    assert (await again).code == ResponseCode.SUCCESS  # a duplicate of the first decision
    refused = await rollback
    assert refused.code != ResponseCode.SUCCESS and "already" in (refused.remark or "")
    assert bodies(door, "TxRace") == [b"b0"]  # committed once, never twice
    history = door.broker.transactions.show(half.ext_fields["transactionId"])["history"]
    assert [h["kind"] for h in history] == ["HALF_STORED", "DECISION", "CONFLICT"]


async def test_a_failed_decision_write_applies_nothing_and_a_later_commit_stores_it_once(door: Door) -> None:
    (half,) = await halves(door, "TxFail", 1)
    commit = end_header("TxFail", "u0", half, TRANSACTION_COMMIT_TYPE)
    door.fs.fail_next_write(errno.ENOSPC)
    failed = await door.client.request(RequestCode.END_TRANSACTION, commit)
    assert failed.code != ResponseCode.SUCCESS
    txid = half.ext_fields["transactionId"]
    assert door.broker.transactions.show(txid)["state"] == "PENDING"
    assert bodies(door, "TxFail") == []
    retried = await door.client.request(RequestCode.END_TRANSACTION, commit)
    assert retried.code == ResponseCode.SUCCESS
    assert bodies(door, "TxFail") == [b"b0"]
    assert door.broker.transactions.show(txid)["state"] == "COMMITTED"


async def test_a_half_send_and_its_commit_are_answered_from_the_read_callback_without_a_task(
    door: Door,
) -> None:
    """The door appends a half message and an END_TRANSACTION where it reads them and answers each
    from a callback once it is durable (a ``Deferred``), as it does a plain send: no task per request."""
    handler = make_handler(RemotingContext(door.broker, "127.0.0.1:10911"))
    endpoint = RemotingEndpoint(handler)  # never connected: the handler reads only its peer
    sent = handler.inline(
        make_request(RequestCode.SEND_MESSAGE_V2, 1, half_header("TxInline", "u0"), b"b0"), endpoint
    )
    assert type(sent) is Deferred
    await sent.durable
    answered = sent.finish(None)
    assert isinstance(answered, bytes)  # the half's frame is rendered straight, as a plain send's
    half = frame.decode(answered)
    assert half.code == ResponseCode.SUCCESS and half.ext_fields["transactionId"] == half.ext_fields["msgId"]
    commit = end_header("TxInline", "u0", half, TRANSACTION_COMMIT_TYPE)
    ended = handler.inline(make_request(RequestCode.END_TRANSACTION, 2, commit), endpoint)
    assert type(ended) is Deferred
    await ended.durable
    answer = ended.finish(None)
    assert isinstance(answer, bytes)  # the success frame is rendered straight too
    assert frame.decode(answer).code == ResponseCode.SUCCESS
    assert bodies(door, "TxInline") == [b"b0"]
    again = handler.inline(make_request(RequestCode.END_TRANSACTION, 3, commit), endpoint)
    assert (
        isinstance(again, RemotingCommand) and again.code == ResponseCode.SUCCESS
    )  # a duplicate: nothing stored
    assert bodies(door, "TxInline") == [b"b0"]
    assert door.broker.transactions.show(half.ext_fields["transactionId"])["state"] == "COMMITTED"
