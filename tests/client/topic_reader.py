"""Read a whole topic as it is now (every queue from its first offset to its current end), no waiting.

Assertions that something is *absent* need an exact read: polling "until N arrived" proves nothing
when N is 0, and waits out its deadline when the expected count is wrong.
"""

from __future__ import annotations

import asyncio

from txmq.client._remoting import RemotingTransport
from txmq.client._transport import BEGINNING, END, PullStatus
from txmq.common.message import MessageView


async def read_topic_async(namesrv: str, topic: str) -> list[MessageView]:
    transport = RemotingTransport(namesrv)
    got: list[MessageView] = []
    try:
        for mq in await transport.route(topic, for_write=False):
            offset, end = (
                await transport.resolve_offset(mq, BEGINNING),
                await transport.resolve_offset(mq, END),
            )
            while offset < end:
                batch = await transport.pull(
                    "topic-reader", mq, offset, max_messages=256, expression="*", long_poll_ms=0,
                    max_bytes=8 << 20,
                )  # fmt: skip
                got.extend(batch.messages)
                if batch.status is not PullStatus.FOUND and batch.next_offset <= offset:
                    break
                offset = batch.next_offset
    finally:
        await transport.close()
    return got


def read_topic(namesrv: str, topic: str) -> list[MessageView]:
    return asyncio.run(read_topic_async(namesrv, topic))
