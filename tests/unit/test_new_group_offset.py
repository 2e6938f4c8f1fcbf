"""Where a group with no committed offset starts (QUERY_CONSUMER_OFFSET): RocketMQ's young-queue rule."""

from __future__ import annotations

from txmq.broker.offsets import starts_from_zero

GIB = 1 << 30


def test_a_queue_starting_at_zero_near_the_log_end_starts_a_new_group_at_zero() -> None:
    assert starts_from_zero(0, 10 * GIB, 12 * GIB, 16 * GIB, 0.4)


def test_an_empty_queue_starts_at_zero() -> None:
    assert starts_from_zero(0, None, 50 * GIB, 16 * GIB, 0.4)


def test_a_queue_whose_start_is_far_behind_the_log_end_is_left_to_the_client() -> None:
    assert not starts_from_zero(0, 0, 7 * GIB, 16 * GIB, 0.4)  # 7 GiB behind: over 40 % of 16 GiB
    assert starts_from_zero(0, 1 * GIB, 7 * GIB, 16 * GIB, 0.4)  # 6 GiB behind: within it


def test_a_queue_whose_start_was_deleted_is_left_to_the_client() -> None:
    assert not starts_from_zero(5, 100, 200, 16 * GIB, 0.4)
