"""A SEND_BATCH_MESSAGE read by the C scan is answered first, then dispatched (SYNC flush).

``SendService.lane_columns`` appends with ``put_columns(shared=True)``: the remoting door waits on the
group's ``Completion``, so the batch's answer is written inside the callback that completes the group,
once the group is fdatasynced and before its ConsumeQueue units and index entries are written (as a
single send's answer is); the dispatch follows in the same call, so anything the loop reads after the
answer (a pull) finds the batch. Without the scan (``TXMQ_PURE=1``) the batch goes the general way,
awaited as a task, and is answered after its dispatch as before.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from txmq.broker.broker import Broker
from txmq.broker.config import BrokerConfig
from txmq.common.message import Message, MessageQueue
from txmq.protocol.remoting.codes import ResponseCode, SerializeType
from txmq.protocol.remoting.connection import RemotingConnection
from txmq.protocol.remoting.frame import decode_frame
from txmq.server.remoting import producer
from txmq.server.remoting.context import RemotingContext
from txmq.server.remoting.dispatch import make_handler
from txmq.server.remoting_transport import RemotingEndpoint
from txmq.storage.api import FlushMode

TOPIC = "AnswerFirst"


class _Sink(asyncio.Transport):
    """Records, at each write, whether the store had dispatched (and synced) the batch's last record."""

    def __init__(self, broker: Broker, last_queue_offset: int) -> None:
        super().__init__()
        self.broker = broker
        self.last = last_queue_offset
        self.writes: list[tuple[bytes, bool, int, int]] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        store = self.broker.store
        visible = bool(store.read_queue(TOPIC, 0, self.last, 1).records)
        self.writes.append((bytes(data), visible, store.flushed_offset, store.dispatched_offset))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("10.0.0.1", 4242) if name == "peername" else default


def _batch_frame(count: int) -> bytes:
    from txmq.client._remoting import RemotingTransport

    transport = RemotingTransport("127.0.0.1:9876")
    conn = RemotingConnection(serialize_type=SerializeType.ROCKETMQ)
    mq = MessageQueue(TOPIC, 0, "broker-a")
    messages = [Message(TOPIC, b"m%d" % i) for i in range(count)]
    code, ext, body, _ = transport._send_request(mq, messages, "PG", 0)
    return conn.send(conn.new_request(code, ext, body))


@pytest.mark.parametrize("fsync_inline", [True, False])
async def test_a_scanned_batch_is_answered_after_its_fsync_and_before_its_dispatch(
    tmp_path: Path, fsync_inline: bool
) -> None:
    broker = await Broker.open(BrokerConfig(data_dir=str(tmp_path), flush=FlushMode.SYNC))
    try:
        broker.store.inline_sync_us_max = math.inf if fsync_inline else -1.0
        broker.topics.create(TOPIC, queues=1)
        endpoint = RemotingEndpoint(make_handler(RemotingContext(broker, "127.0.0.1:10911")))
        for round_ in range(3):
            count = 10
            sink = _Sink(broker, round_ * count + count - 1)
            endpoint.connection_made(sink)
            endpoint.data_received(_batch_frame(count))
            for _ in range(500):
                if sink.writes:
                    break
                await asyncio.sleep(0.001 if not fsync_inline else 0)
            assert len(sink.writes) == 1
            data, visible, flushed, dispatched = sink.writes[0]
            decoded = decode_frame(data)
            assert decoded is not None
            answer = decoded[0]
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert int(answer.ext_fields["queueOffset"]) == round_ * count
            end = broker.store.max_offset(TOPIC, 0)
            assert end == (round_ + 1) * count
            # durable when answered: the group's fsync covers every record of the batch
            assert flushed >= broker.store.read_queue(TOPIC, 0, end - 1, 1).records[0].physical_offset
            if producer._LANESCAN is not None:
                # answered before the dispatch (the C scan's lane): not yet in the ConsumeQueue ...
                assert not visible
                assert dispatched < flushed
            else:  # the general way: a task awaiting a future, resumed after the dispatch
                assert visible
            # ... and there right after, in the same loop callback
            assert broker.store.read_queue(TOPIC, 0, end - 1, 1).records
    finally:
        await broker.close()
