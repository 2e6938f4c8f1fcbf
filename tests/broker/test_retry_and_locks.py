"""4.x send-back retries (%RETRY% with delay levels, then %DLQ%) and orderly queue locks, on a real broker
driven by a FakeClock."""

from __future__ import annotations

from txmq.broker import retry
from txmq.broker.broker import Broker
from txmq.broker.locks import QueueLocks
from txmq.broker.send import SendContext
from txmq.common import properties as props
from txmq.common.clock import FakeClock
from txmq.common.message import Message, MessageView


async def _pull(broker: Broker, topic: str, offset: int = 0) -> list[MessageView]:
    broker.store.flush()  # dispatch what was appended, so the pull sees it
    return (await broker.pull(group="G", topic=topic, queue_id=0, offset=offset, batch_size=32)).messages


async def _pull_all(broker: Broker, topic: str) -> list[tuple[bytes, dict[str, str]]]:
    return [(v.body, dict(v.properties)) for v in await _pull(broker, topic)]


async def test_send_back_delays_through_retry_then_dead_letters(broker: Broker, clock: FakeClock) -> None:
    [sent] = await broker.send([Message("Orders", b"work", tags="t")], SendContext(queue_id=0))
    original = (await _pull(broker, "Orders"))[0]
    first = await retry.send_back(broker, "G", original.commit_log_offset, 0, max_reconsume_times=2)
    assert (first.topic, first.delay_level, first.reconsume_times) == ("%RETRY%G", 3, 1)
    assert await _pull_all(broker, "%RETRY%G") == []  # parked until delay level 3 (10 s) elapses
    clock.advance(9_000)
    await broker.tick(clock.now_ms())
    broker.store.flush()
    assert await _pull_all(broker, "%RETRY%G") == []
    clock.advance(1_000)
    await broker.tick(clock.now_ms())
    broker.store.flush()
    [(body, properties)] = await _pull_all(broker, "%RETRY%G")
    assert body == b"work"
    assert properties[props.RECONSUME_TIME] == "1"
    assert properties[props.RETRY_TOPIC] == "Orders"
    assert properties[props.ORIGIN_MESSAGE_ID] == sent.message_id
    retried = (await _pull(broker, "%RETRY%G"))[0]
    second = await retry.send_back(broker, "G", retried.commit_log_offset, 0, max_reconsume_times=2)
    assert (second.delay_level, second.reconsume_times) == (4, 2)
    clock.advance(30_000)
    await broker.tick(clock.now_ms())
    broker.store.flush()
    await broker.tick(clock.now_ms())
    broker.store.flush()
    again = (await _pull(broker, "%RETRY%G", 1))[0]
    third = await retry.send_back(broker, "G", again.commit_log_offset, 0, max_reconsume_times=2)
    assert third.topic == "%DLQ%G"
    [(body, properties)] = await _pull_all(broker, "%DLQ%G")
    assert body == b"work"
    assert properties[props.DLQ_ORIGIN_TOPIC] == "Orders"


async def test_explicit_delay_level_and_negative_level_goes_to_dlq(broker: Broker) -> None:
    await broker.send([Message("Jobs", b"j")], SendContext(queue_id=0))
    view = (await _pull(broker, "Jobs"))[0]
    assert (await retry.send_back(broker, "G", view.commit_log_offset, 1)).delay_level == 1
    assert (await retry.send_back(broker, "G", view.commit_log_offset, -1)).topic == "%DLQ%G"


def test_queue_locks_have_one_owner_and_lapse() -> None:
    clock = FakeClock()
    locks = QueueLocks(clock, lease_ms=60_000)
    queues = [("T", 0), ("T", 1)]
    assert locks.try_lock("G", "c1", queues) == queues
    assert locks.try_lock("G", "c2", [("T", 1), ("T", 2)]) == [("T", 2)]
    assert locks.owner("G", "T", 1) == "c1"
    assert locks.try_lock("OtherGroup", "c2", [("T", 1)]) == [("T", 1)]  # locks are per group
    clock.advance(59_999)
    assert locks.try_lock("G", "c1", [("T", 0)]) == [("T", 0)]  # renewed
    clock.advance(1)
    assert locks.try_lock("G", "c2", queues) == [("T", 1)]  # c1's lease on queue 1 lapsed, not on 0
    locks.unlock("G", "c2", [("T", 0)])  # not c2's: ignored
    assert locks.owner("G", "T", 0) == "c1"
    locks.release_client("c1")
    assert locks.owner("G", "T", 0) is None
