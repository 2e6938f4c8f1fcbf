"""Corrections the broker shares with Apache RocketMQ (session 20's field4 probes): a group offset past
a queue's end (Apache's POP commits the end; the admin view's lag)."""

from __future__ import annotations

from txmq.broker.admin import dispatch
from txmq.broker.broker import Broker

from .test_send_receive import receive, send


async def test_a_pop_group_offset_past_the_queue_end_is_corrected_to_the_end(broker: Broker) -> None:
    """An offset committed past a queue's end (a client's UPDATE_CONSUMER_OFFSET, or a log that lost
    its unflushed tail) made a POP group start there: the messages appended below it were never
    delivered, and ``group describe`` showed a negative lag (-1 one past the end). Apache's POP
    commits the queue's end instead (PopMessageProcessor: "Pop initial offset, because store is no
    correct")."""
    broker.topics.create("t", queues=1)
    await send(broker, "t", b"before")
    broker.update_offset("g", "t", 0, 2)  # one past the end (the end is 1)
    described = await dispatch(broker, "group.describe", {"group": "g"})
    assert [(q["offset"], q["max_offset"], q["lag"]) for q in described["queues"]] == [(2, 1, 0)]
    assert await receive(broker, "g", "t") == []  # nothing new; the offset is corrected to the end
    assert broker.get_offset("g", "t", 0) == 1
    await send(broker, "t", b"after")  # offset 1, below the committed 2
    got = await receive(broker, "g", "t")
    assert [v.body for v in got] == [b"after"]
