"""Read-your-writes on a sync-flush ``txmq broker``: a pull sent right after a send's answer finds the
message, every time. The broker writes a remoting send's answer before it writes the group's
ConsumeQueue and index entries (answer first, then dispatch, in one loop callback); a pull that
reached the broker between the two would miss the acknowledged message. Client and broker are
separate processes, so the pull really races the broker's dispatch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.integration.remoting_support import RunningBroker, broker_process, send_header
from tests.integration.test_remoting_broker import pull_header
from txmq.client import Message, Producer
from txmq.protocol.remoting.codes import TRANSACTION_COMMIT_TYPE, RequestCode, ResponseCode
from txmq.protocol.remoting.headers import EndTransactionRequestHeader
from txmq.protocol.remoting.message_codec import decode_messages
from txmq.server.remoting_transport import RemotingEndpoint, connect

ROUNDS = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    # one queue per topic: a gRPC send's receipt names no queue, only the offset in it
    with broker_process(
        tmp_path_factory.mktemp("ryw"), "--flush", "sync", "--default-queues", "1"
    ) as running:
        yield running


@pytest.fixture
async def endpoints(broker: RunningBroker) -> AsyncIterator[tuple[RemotingEndpoint, RemotingEndpoint]]:
    sender = await connect(broker.host, broker.remoting_port)
    reader = await connect(broker.host, broker.remoting_port)
    yield sender, reader
    await sender.close()
    await reader.close()


async def _pull_finds(reader: RemotingEndpoint, topic: str, queue_offset: int, body: bytes) -> None:
    """A pull at ``queue_offset`` without long polling finds ``body`` there, at once."""
    pulled = await reader.request(RequestCode.PULL_MESSAGE, pull_header(topic, queue_offset))
    assert pulled.code == ResponseCode.SUCCESS, (queue_offset, pulled.code, pulled.remark)
    assert decode_messages(pulled.body)[0].body == body


@pytest.mark.parametrize("same_connection", [True, False])
async def test_a_pull_right_after_a_remoting_send_finds_the_message(
    endpoints: tuple[RemotingEndpoint, RemotingEndpoint], same_connection: bool
) -> None:
    sender, other = endpoints
    reader = sender if same_connection else other
    topic = f"Ryw{int(same_connection)}"
    for i in range(ROUNDS):
        body = b"m%d" % i
        sent = await sender.request(RequestCode.SEND_MESSAGE_V2, send_header(topic, {}, queue_id=0), body)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        await _pull_finds(reader, topic, int(sent.ext_fields["queueOffset"]), body)


async def test_a_pull_right_after_an_answered_commit_finds_the_committed_message(
    endpoints: tuple[RemotingEndpoint, RemotingEndpoint],
) -> None:
    """A half send and an END_TRANSACTION sent as a request (answered once its records are durable,
    from the group's completion as a send is) and a pull right after: the commit's message is there."""
    sender, reader = endpoints
    tx_props = {"TRAN_MSG": "true", "PGROUP": "PGR"}
    for i in range(40):
        uniq = f"RYW{i}"
        half = await sender.request(
            RequestCode.SEND_MESSAGE_V2,
            send_header("RywTx", {**tx_props, "UNIQ_KEY": uniq}, queue_id=0, sys_flag=4, group="PGR"),
            b"t%d" % i,
        )
        assert half.code == ResponseCode.SUCCESS, half.remark
        hidden = await reader.request(RequestCode.PULL_MESSAGE, pull_header("RywTx", i))
        assert hidden.code != ResponseCode.SUCCESS  # a half message is invisible before its commit
        end = EndTransactionRequestHeader(
            producer_group="PGR", tran_state_table_offset=0, commit_log_offset=0,
            commit_or_rollback=TRANSACTION_COMMIT_TYPE, msg_id=uniq, topic="RywTx",
            from_transaction_check=False, transaction_id=half.ext_fields["transactionId"],
        )  # fmt: skip
        ended = await sender.request(RequestCode.END_TRANSACTION, end.to_ext_fields())
        assert ended.code == ResponseCode.SUCCESS, ended.remark
        await _pull_finds(reader, "RywTx", i, b"t%d" % i)


async def test_a_pull_right_after_a_grpc_send_finds_the_message(
    broker: RunningBroker, endpoints: tuple[RemotingEndpoint, RemotingEndpoint]
) -> None:
    _, reader = endpoints
    async with Producer(f"{broker.host}:{broker.grpc_port}", transport="grpc") as producer:
        for i in range(ROUNDS // 3):
            body = b"g%d" % i
            result = await producer.send(Message("RywGrpc", body))
            pulled = await reader.request(
                RequestCode.PULL_MESSAGE, pull_header("RywGrpc", result.queue_offset)
            )
            assert pulled.code == ResponseCode.SUCCESS, (i, pulled.code, pulled.remark)
            assert decode_messages(pulled.body)[0].body == body


async def test_a_pull_right_after_a_batch_answer_finds_its_last_message(
    endpoints: tuple[RemotingEndpoint, RemotingEndpoint],
) -> None:
    """A SEND_BATCH_MESSAGE as the SDK renders it (read by the broker's C scan when built, answered as
    its group completes, before the group's dispatch) and a pull right after at the batch's last
    position, on another connection: the message is there."""
    from txmq.client._remoting import RemotingTransport
    from txmq.common.message import MessageQueue

    sender, reader = endpoints
    transport = RemotingTransport("127.0.0.1:9876")  # renders requests only, never connects
    mq = MessageQueue("RywBatch", 0, "broker-a")
    for i in range(ROUNDS // 3):
        messages = [Message("RywBatch", b"b%d-%d" % (i, j)) for j in range(20)]
        code, ext, body, _ = transport._send_request(mq, messages, "PG", 0)
        sent = await sender.request(code, ext, body)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        last = int(sent.ext_fields["queueOffset"]) + len(messages) - 1
        await _pull_finds(reader, "RywBatch", last, messages[-1].body)
