"""Every bound txmq enforces, in one place, with the relationships between them checked at import.

Names follow the TigerStyle convention: the unit and qualifier come last (``body_bytes_max``).
Edges (gRPC, remoting, SDK, CLI) enforce these with a specific error before anything is stored.
"""

from __future__ import annotations

import re
from typing import Final

KiB: Final = 1024
MiB: Final = 1024 * KiB

# Messages
body_bytes_max: Final = 4 * MiB  # RocketMQ maxMessageSize
properties_bytes_max: Final = 32 * KiB  # RocketMQ stores a 2-byte properties length
property_count_max: Final = 128
tag_bytes_max: Final = 1024
key_bytes_max: Final = 1024
keys_count_max: Final = 64
message_group_bytes_max: Final = 1024
# the gRPC door refuses a message group of this many UTF-8 bytes or more, as the Apache proxy does
# (ProxyConfig.maxMessageGroupSize = 64, checked with >=): at most 63 bytes over gRPC
grpc_message_group_bytes_max: Final = 64
batch_bytes_max: Final = 4 * MiB  # a batch send, all bodies together
batch_count_max: Final = 1024

# Names (RocketMQ TopicValidator): ^[%|a-zA-Z0-9_-]+$
topic_name_len_max: Final = 127
group_name_len_max: Final = 120
retry_topic_name_len_max: Final = 255
name_pattern: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")

# Queues
queues_per_topic_max: Final = 1024
queues_per_topic_default: Final = 4
queue_id_max: Final = 65_535  # store format bound; system topics (the timer wheel) exceed the user limit

# Wire
frame_bytes_max: Final = 16 * MiB  # remoting NettyDecoder FRAME_MAX_LENGTH
grpc_message_bytes_max: Final = 16 * MiB
remoting_header_bytes_max: Final = 64 * KiB
# the SDK's remoting channel writes the frames of one loop turn together, but no more than this at a
# time: with many requests sent in one turn (256 in flight) the broker starts on the first ones while
# the rest are built (async-256 on 2 cores: 22k -> 40k msg/s, benchmarks/results/session22/README.md)
client_write_hold_bytes_max: Final = 32 * KiB

# Consumption
receive_batch_max: Final = 1024
pull_batch_max: Final = 1024
# A group with no offset for a queue starts it at 0 (QUERY_CONSUMER_OFFSET) while the queue's first message
# lies within this share of the machine's memory from the log's end (RocketMQ's
# accessMessageInMemoryMaxRatio, 40): a young queue is read from its start by a new 4.x consumer
new_group_from_zero_memory_ratio: Final = 0.4
pull_bytes_max: Final = 8 * MiB
# ReceiveMessage's invisible duration bounds and the lease of an auto-renew receive: the Apache proxy's
# defaults (ProxyConfig minInvisibleTimeMillsForRecv 10 s, maxInvisibleTimeMills 12 h,
# defaultInvisibleTimeMills 60 s); broker settings (BrokerConfig), these are their defaults
receive_invisible_ms_min_default: Final = 10_000
invisible_duration_ms_max: Final = 12 * 3_600_000
invisible_ms_auto_renew_default: Final = 60_000
# an auto-renew lease is renewed this long before it ends while its client is live (ProxyConfig
# renewAheadTimeMillis 10 s); renewal n (from 0) leases auto_renew_steps_ms[n], the last step repeating
# (the proxy's RenewStrategyPolicy: 1 m, 3 m, 5 m, 10 m, 30 m, then 1 h); the first renewal due this long
# after the receive or later (ProxyConfig renewMaxTimeMillis 3 h) is not made: the lease is changed to
# the group's retry delay for its delivery attempt instead, a nack (the proxy's STOP_RENEW)
auto_renew_ahead_ms: Final = 10_000
auto_renew_steps_ms: Final = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
auto_renew_max_ms: Final = 3 * 3_600_000
# a consumer group's redelivery delays after delivery attempt 1, 2, ... (the last repeating) unless
# BrokerConfig.retry_backoff_ms sets them: RocketMQ's delay levels 1 s 5 s 10 s 30 s 1 m 2 m ... 2 h
retry_backoff_ms_default: Final = tuple(
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)
# a client gone (NotifyClientTermination, heartbeats silent past the client expiry, or its Telemetry
# stream closed and not reopened within the grace) has its auto-renewed leases cut to end this soon
# (ProxyConfig invisibleTimeMillisWhenClear 1 s): another consumer gets them in seconds, not a lease later
auto_renew_clear_ms: Final = 1_000
client_detached_grace_ms: Final = 2_000
# a v2 ReceiveMessage is served at most this many messages by default (the proxy's
# MAX_MSG_NUMS_FOR_POP_REQUEST: a larger batch size is lowered to it); BrokerConfig.grpc_receive_batch_max
# may raise it up to receive_batch_max
grpc_receive_batch_max_default: Final = 32
long_polling_ms_max: Final = 60_000
inflight_per_group_max: Final = 100_000
max_delivery_attempts_default: Final = 17  # 16 retries + the first delivery

# Delays
delay_ms_max_default: Final = 3 * 86_400_000  # 3 days, RocketMQ 5 timerMaxDelaySec

# Storage
record_bytes_max: Final = body_bytes_max + properties_bytes_max + 64 * KiB
segment_bytes_default: Final = 1024 * MiB
segment_bytes_min: Final = 4 * KiB
# zero-filled, fsynced CommitLog space kept ready after the data in SYNC mode (0: files grow by appends)
prealloc_bytes_default: Final = 1 * MiB
index_entries_per_file: Final = 65_536  # key index file; only the newest (unsealed) one is held in a dict
# a batch of at most this many records is indexed record by record (a transaction commit's 2 records):
# per key, cheaper than the columnar pass (benchmarks/results/txstore.md)
index_small_batch: Final = 4
# a batch of at most this many records is appended record by record into the group buffer (a transaction
# commit's 2 records: its message and op record), committed together: cheaper than the columnar pass
# (benchmarks/results/txbroker2.md)
append_small_batch: Final = 4
consume_queue_unit_bytes: Final = 20
consume_queue_units_per_file_default: Final = 300_000
# SYNC group commit: fsync on the event loop's thread while the average fsync is at most this (a thread
# hop costs two GIL hand-offs, up to a 5 ms switch interval each while the loop is busy, and two thread
# wake-ups: ~0.1 ms on a quiet host, 0.5-1+ ms per call with 2 cores at load 5-20), else in a thread. For
# a lone append on a mostly idle loop (one producer in flight) nobody waits on the blocked loop, so only a
# very slow disk goes to a thread: the old limit of 1 ms sent every single send on a disk whose fdatasync
# had slowed to 1-4 ms through both hops (grpc single SYNC send: +0.5-1.1 ms per call, see grpcpath.md).
flush_inline_sync_us_max: Final = 20_000.0
flush_inline_shared_sync_us_max: Final = 300.0  # ... for a group of several appends (several producers)
# ... and only while the loop's thread used at most this share of the wall time since the last group
# completed (gRPC with many calls in flight keeps it busy, ~1.0: an inline fsync there halved the rate; one
# remoting producer ~0.5-0.73)
flush_inline_busy_max: Final = 0.75
flush_sync_ema_weight: Final = 0.25  # weight of the newest fsync in the moving average
flush_defer_group_appends_min: Final = 2  # a group after one of this many appends waits for more:
flush_defer_turns: Final = 2  # this many loop turns (4 producers: 1.9 -> 3.8 appends per fsync)
# A free-space reading (statfs) of at least this much stands for this long: a write over prepared space
# asks before every group, and another writer would have to fill 1 GiB within 100 ms for one to go unseen
disk_free_ample_bytes: Final = 1 << 30
disk_free_ample_ms: Final = 100

# Transactions
transaction_timeout_ms_default: Final = 6_000
transaction_check_interval_ms_default: Final = 30_000
transaction_check_max_default: Final = 15
transaction_check_batch_max: Final = 1_000  # half messages examined per check round
# half messages kept in memory from their send until their END_TRANSACTION (so the decision needs no
# log read); the oldest is forgotten beyond this (it is read from the log then)
transaction_half_cache_max: Final = 4_096
transaction_half_cache_bytes_max: Final = 64 * MiB  # their bodies and properties together

# Spark source (txmq.spark.fetch): consecutive pull bodies joined into one Arrow batch up to this size
spark_arrow_batch_bytes: Final = 4 * MiB

# Spark sink (txmq.spark.sink)
spark_sink_sends_in_flight: Final = 256  # half messages one executor task has on the wire at once
spark_sink_ends_in_flight: Final = 512  # END_TRANSACTIONs the driver's commit has on the wire at once
spark_sink_id_len_max: Final = 40  # longer (or non-name) sink ids are hashed into the marker topic name
spark_sink_tokens_max: Final = 100_000  # task attempts one batch's marker may name
spark_sink_check_immunity_s_default: Final = 60  # a batch's halves are not checked back sooner
spark_sink_marker_max_age_ms: Final = 500  # check-back answers from a marker log read at most this old
spark_sink_send_retries: Final = 2  # re-sends of one half whose send failed (each try is tagged apart)
spark_sink_retried_max: Final = 1_000  # re-sent rows one task attempt may report; beyond, the attempt fails

# Back-pressure
send_pending_bytes_max: Final = 256 * MiB
# client connections per door: remoting answers more with SYSTEM_BUSY and closes them; the gRPC port's
# permissive TLS front closes more on accept (grpc itself has no such bound)
connections_max: Final = 10_000
grpc_front_first_bytes_s: Final = 30.0  # a gRPC front connection silent this long after accept is closed
grpc_concurrent_rpcs_max: Final = 10_000  # gRPC calls in progress (long polls, Telemetry streams) at once
damaged_records_logged_max: Final = 1024  # damaged CommitLog records the broker log names once each


def validate_limits() -> None:
    """Relationships between limits; raises AssertionError at import if someone breaks them."""
    if not body_bytes_max + properties_bytes_max < record_bytes_max:
        raise AssertionError("a maximal message must fit one record")
    if not record_bytes_max < frame_bytes_max:
        raise AssertionError("a maximal record must fit one frame")
    if not batch_bytes_max <= frame_bytes_max:
        raise AssertionError("a maximal batch must fit one frame")
    if not record_bytes_max < segment_bytes_default:
        raise AssertionError("a maximal record must fit one segment")
    if not group_name_len_max + len("%RETRY%") <= retry_topic_name_len_max:
        raise AssertionError("retry topic names must fit")


validate_limits()
