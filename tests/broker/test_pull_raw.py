"""``pull_raw`` (the staged remoting pull, kept as an oracle in ``tests/pull_oracle.py``) against
``Broker.pull``: the same statuses and offsets for every position, filter and budget, and wire bodies
byte for byte identical to the general encoding, including retried messages (RECONSUME_TIME) that
take the general path; and ``Broker.pull_into`` (the fused path PULL_MESSAGE serves, records straight
into ``PullSink``) against both."""

from __future__ import annotations

from collections.abc import Callable

from txmq.broker import retry
from txmq.broker.broker import Broker, PullResult, RawPullResult
from txmq.broker.records import to_view
from txmq.broker.send import SendContext
from txmq.common import names
from txmq.common.message import Message
from txmq.protocol.remoting.message_codec import encode_message
from txmq.server.remoting.convert import PullSink, to_wire

from ..pull_oracle import encode_pulled, pull_raw, pulled

CTX = SendContext(producer_group="pg", born_host="10.0.0.7:4321")


def _general_body(result: PullResult, topic: str) -> bytes:
    return b"".join(encode_message(to_wire(v, topic=topic)) for v in result.messages)


def _lean_body(broker: Broker, result: RawPullResult, topic: str, fallbacks: list[int]) -> bytes:
    def general(physical_offset: int) -> bytes:
        fallbacks.append(physical_offset)
        return encode_message(to_wire(to_view(broker.store.read(physical_offset)), topic=topic))

    return encode_pulled(topic, pulled(result.records, topic, general))


async def test_pull_raw_agrees_with_pull(broker: Broker) -> None:
    for i in range(40):
        tags = ("a", "b", None)[i % 3]
        props = {"k": "v" * i}
        message = Message(topic="PR", body=b"%d" % i * (i + 1), tags=tags, keys=(f"k{i}",), properties=props)
        await broker.send(
            [message], SendContext(producer_group="pg", born_host=CTX.born_host, queue_id=i % 2)
        )
    fallbacks: list[int] = []
    for queue_id in (0, 1):
        for offset in range(0, 24, 3):
            for batch in (1, 4, 32):
                for expression in (None, "*", "a", "b || a", "zzz"):
                    for max_bytes in (10, 200, 1 << 20):
                        kw = {
                            "group": "g", "topic": "PR", "queue_id": queue_id, "offset": offset,
                            "batch_size": batch, "expression": expression, "max_bytes": max_bytes,
                        }  # fmt: skip
                        general = await broker.pull(**kw)  # type: ignore[arg-type]
                        raw = await pull_raw(broker, **kw)  # type: ignore[arg-type]
                        assert (raw.status, raw.next_offset, raw.min_offset, raw.max_offset) == (
                            general.status, general.next_offset, general.min_offset, general.max_offset,
                        )  # fmt: skip
                        assert len(raw.records) == len(general.messages)
                        lean = _lean_body(broker, raw, "PR", fallbacks)
                        assert lean == _general_body(general, "PR")
                        sink = PullSink("PR", _no_general)
                        fused = await broker.pull_into(sink, **kw)  # type: ignore[arg-type]
                        assert (fused.status, fused.next_offset, fused.min_offset, fused.max_offset) == (
                            general.status, general.next_offset, general.min_offset, general.max_offset,
                        )  # fmt: skip
                        assert sink.count == len(general.messages)
                        assert sink.body() == lean
    assert not fallbacks, "plain messages take the lean path"


async def test_dead_letters_with_reconsume_time_take_the_general_path(broker: Broker) -> None:
    results = await broker.send([Message(topic="PD", body=b"m%d" % i, tags="t") for i in range(3)], CTX)
    for result in results:
        view = await broker.pull(group="g", topic="PD", queue_id=result.queue.queue_id, offset=0,
                                 batch_size=32)  # fmt: skip
        offset = next(v.commit_log_offset for v in view.messages if v.message_id == result.message_id)
        await retry.send_back(broker, "g", offset, -1)  # straight to %DLQ%g, with RECONSUME_TIME
    dlq = names.dlq_topic("g")
    kw = {"group": "g", "topic": dlq, "queue_id": 0, "offset": 0, "batch_size": 32, "expression": "t"}
    general = await broker.pull(**kw)  # type: ignore[arg-type]
    raw = await pull_raw(broker, **kw)  # type: ignore[arg-type]
    assert [v.reconsume_times for v in general.messages] == [1, 1, 1]
    fallbacks: list[int] = []
    assert _lean_body(broker, raw, dlq, fallbacks) == _general_body(general, dlq)
    assert len(fallbacks) == 3
    for expression in ("t", None):  # a tag filter takes the raw read; none, the fused one
        kw["expression"] = expression
        fused_fallbacks: list[int] = []
        sink = PullSink(dlq, _general_of(broker, dlq, fused_fallbacks))
        fused = await broker.pull_into(sink, **kw)  # type: ignore[arg-type]
        assert (fused.status, fused.next_offset, sink.count) == (general.status, general.next_offset, 3)
        assert sink.body() == _general_body(general, dlq)
        assert len(fused_fallbacks) == 3


def _general_of(broker: Broker, topic: str, fallbacks: list[int]) -> Callable[[int], bytes]:
    def general(physical_offset: int) -> bytes:
        fallbacks.append(physical_offset)
        return encode_message(to_wire(to_view(broker.store.read(physical_offset)), topic=topic))

    return general


def _no_general(physical_offset: int) -> bytes:
    raise AssertionError(f"record at {physical_offset} should not need the general path")
