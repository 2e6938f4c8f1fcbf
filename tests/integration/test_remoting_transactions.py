"""Transactions over remoting: a half message, END_TRANSACTION (oneway), and the broker's check-back
(CHECK_TRANSACTION_STATE on the producer's own connection) answered by the test."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.integration.remoting_support import RunningBroker, broker_process, send
from txmq.cli import admin_client
from txmq.protocol.remoting.bodies import HeartbeatData
from txmq.protocol.remoting.codes import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RequestCode,
    ResponseCode,
)
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from txmq.protocol.remoting.message_codec import decode_message
from txmq.server.remoting_transport import RemotingEndpoint, connect


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with broker_process(tmp_path_factory.mktemp("remoting-tx")) as running:
        yield running


def end_fields(
    reply: RemotingCommand, decision: int, *, msg_id: str, from_check: bool = False
) -> dict[str, str]:
    return EndTransactionRequestHeader(
        producer_group="PGT", tran_state_table_offset=0, commit_log_offset=0, commit_or_rollback=decision,
        msg_id=msg_id, topic="RemTx", from_transaction_check=from_check,
        transaction_id=reply.ext_fields["transactionId"],
    ).to_ext_fields()  # fmt: skip


async def pull_bodies(endpoint: RemotingEndpoint, topic: str) -> list[bytes]:
    bodies: list[bytes] = []
    for queue_id in range(4):
        fields = {
            "consumerGroup": "G", "topic": topic, "queueId": str(queue_id), "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
        }  # fmt: skip
        reply = await endpoint.request(RequestCode.PULL_MESSAGE, fields)
        if reply.code == ResponseCode.SUCCESS:
            from txmq.protocol.remoting.message_codec import decode_messages

            bodies += [m.body for m in decode_messages(reply.body)]
    return sorted(bodies)


async def test_commit_rollback_and_check_back(broker: RunningBroker) -> None:
    checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    async def on_request(request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand | None:
        assert request.code == RequestCode.CHECK_TRANSACTION_STATE
        assert request.is_oneway
        await checks.put(request)
        return None

    producer = await connect(broker.host, broker.remoting_port, handler=on_request)
    try:
        beat = await producer.request(
            RequestCode.HEART_BEAT, body=HeartbeatData("tx-client", ["PGT"]).to_json()
        )
        assert beat.code == ResponseCode.SUCCESS
        tx_props = {"TRAN_MSG": "true", "PGROUP": "PGT"}
        committed = await send(
            producer, "RemTx", b"commit-me", {**tx_props, "UNIQ_KEY": "U1"}, sys_flag=4, group="PGT"
        )
        rolled = await send(
            producer, "RemTx", b"roll-me-back", {**tx_props, "UNIQ_KEY": "U2"}, sys_flag=4, group="PGT"
        )
        checked = await send(
            producer, "RemTx", b"checked", {**tx_props, "UNIQ_KEY": "U3"}, sys_flag=4, group="PGT"
        )
        assert all(r.code == ResponseCode.SUCCESS for r in (committed, rolled, checked))
        assert await pull_bodies(producer, "RemTx") == []  # half messages are invisible
        producer.oneway(
            RequestCode.END_TRANSACTION, end_fields(committed, TRANSACTION_COMMIT_TYPE, msg_id="U1")
        )
        producer.oneway(
            RequestCode.END_TRANSACTION, end_fields(rolled, TRANSACTION_ROLLBACK_TYPE, msg_id="U2")
        )
        check = await asyncio.wait_for(_check_for(checks, "U3"), 20)
        header = CheckTransactionStateRequestHeader.from_command(check)
        record, _ = decode_message(check.body)
        assert record.properties["PGROUP"] == "PGT"
        assert record.properties["TRAN_MSG"] == "true"
        assert record.properties["__transactionId__"] == checked.ext_fields["transactionId"]
        assert record.sys_flag & TRANSACTION_PREPARED_TYPE
        assert record.body == b"checked"
        answer = EndTransactionRequestHeader(
            producer_group="PGT", tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=TRANSACTION_COMMIT_TYPE,
            msg_id="U3", topic="RemTx", from_transaction_check=True, transaction_id=header.transaction_id,
        )  # fmt: skip
        producer.oneway(RequestCode.END_TRANSACTION, answer.to_ext_fields())
        for _ in range(100):
            if await pull_bodies(producer, "RemTx") == [b"checked", b"commit-me"]:
                break
            await asyncio.sleep(0.05)
        assert await pull_bodies(producer, "RemTx") == [b"checked", b"commit-me"]
    finally:
        await producer.close()


async def _check_for(checks: asyncio.Queue[RemotingCommand], unique_key: str) -> RemotingCommand:
    while True:
        check = await checks.get()
        if decode_message(check.body)[0].properties.get("UNIQ_KEY") == unique_key:
            return check


async def test_regression_oneway_decisions_survive_the_producer_disconnecting(broker: RunningBroker) -> None:
    """A 4.x producer sends END_TRANSACTION oneway and may close its connection right after. The broker
    used to cancel the handlers still running when the connection closed, so those decisions were lost
    (and with the producer gone, no check-back could repair them)."""
    producer = await connect(broker.host, broker.remoting_port)
    tx_props = {"TRAN_MSG": "true", "PGROUP": "PGT"}
    bodies = [b"gone-%03d" % i for i in range(128)]
    replies = [
        await send(
            producer,
            "RemTxGone",
            body,
            {**tx_props, "UNIQ_KEY": f"G{i}"},
            sys_flag=4,
            group="PGT",
            queue_id=i % 4,
        )
        for i, body in enumerate(bodies)
    ]
    assert all(r.code == ResponseCode.SUCCESS for r in replies)
    for i, reply in enumerate(replies):
        fields = end_fields(reply, TRANSACTION_COMMIT_TYPE, msg_id=f"G{i}")
        fields["topic"] = "RemTxGone"
        producer.oneway(RequestCode.END_TRANSACTION, fields)
    await producer.close()  # at once: the decisions are still being stored

    reader = await connect(broker.host, broker.remoting_port)
    try:
        for _ in range(200):
            if await pull_bodies(reader, "RemTxGone") == bodies:
                break
            await asyncio.sleep(0.05)
        assert await pull_bodies(reader, "RemTxGone") == bodies
        # the broker's own record agrees: none of them is still pending (a cancelled handler wrote the
        # commit but not its state, so a later check-back could have committed the message twice)
        ours = {reply.ext_fields["transactionId"] for reply in replies}
        for _ in range(200):
            listed = await asyncio.to_thread(
                admin_client.call, f"{broker.host}:{broker.grpc_port}", "tx.list", {}
            )
            pending = [row for row in listed if row["transaction_id"] in ours]
            if not pending:
                break
            await asyncio.sleep(0.05)
        assert [(row["transaction_id"], row["state"]) for row in pending] == []
    finally:
        await reader.close()
