"""Open = recover: scan the CommitLog tail from the checkpoint, cut a torn tail, refuse mid-log damage.

Definitions:

* The **tail** is the last segment that holds any bytes (empty segment files after it are removed).
* A **torn tail** is a bad or incomplete record in the tail segment with no verifiable record
  starting anywhere after it in that segment. It is what a crash during an append leaves; it was
  never acknowledged in SYNC mode (an ack needs an fsync that covered the whole record), so cutting
  it loses nothing acknowledged. The cut is reported exactly in the RecoveryReport.
* Any other bad record (in an earlier segment, or followed by a valid record, or an earlier segment
  whose data stops before its end without an end marker) is **mid-log corruption**: opening fails
  with CorruptRecord naming the segment, position and reason, and pointing at
  ``txmq store verify`` / ``txmq store repair``.
* A preallocated tail segment (``segment.py``) ends its data with zeros. Bytes that are not zero after
  that end, up to the end of the file, are pieces of unsynced writes: a torn tail, cut (the file is
  truncated there, and prepared again later). A disk writes an unsynced group's sectors back in any
  order, so a valid record may follow the stop; that is a torn tail too when the stop lies at or
  past the checkpoint's flushed offset (durable before) and a whole zero sector stands between
  the stop and that record (a write never put down, not a flipped bit); otherwise it is mid-log
  corruption as above.

Scanning starts at the checkpoint's dispatched offset (ConsumeQueues and index are durable before
it), so recovery time grows with the unflushed tail, not with the log. ConsumeQueue units and index
entries at or after that offset are dropped and rebuilt from the scan (idempotently).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from txmq.common.clock import Clock
from txmq.common.errors import CorruptRecord, TxmqError
from txmq.storage import codec
from txmq.storage.api import QueueUnit, RecoveryReport, StoredRecord
from txmq.storage.checkpoint import Checkpoint, load_checkpoint
from txmq.storage.commitlog import CommitLog, DispatchEntry
from txmq.storage.consume_queue import ConsumeQueueSet
from txmq.storage.fs import FileSystem
from txmq.storage.index import KeyIndex
from txmq.storage.segment import (
    ScanStop,
    Segment,
    ends_before_floor_reason,
    holds_record,
    judge_stop,
    scan_segment,
)


@dataclass
class _Scan:
    start: int
    end: int
    records: int = 0
    truncated_at: int | None = None
    truncated_bytes: int = 0
    truncated_records: int = 0
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    durable_floor: int = 0  # the checkpoint's flushed offset: bytes before it were fsynced


def recover(fs: FileSystem, data_dir: str, log: CommitLog, queues: ConsumeQueueSet, index: KeyIndex,
            clock: Clock) -> RecoveryReport:  # fmt: skip
    """Load everything, scan and repair the tail, queue the tail for dispatch. Sets log.write_offset."""
    started_ms = clock.monotonic_ms()
    segments = log.segments
    notes = segments.load()
    while len(segments.segments) > 1 and not holds_record(segments.segments[-1]):
        notes.append(f"removed empty trailing segment {segments.remove_last().path}")
    queues.load()
    index.load()
    start, checkpoint = _scan_start(fs, data_dir, log, notes)
    for queue in queues.queues.values():
        queue.truncate_from_physical(start)
    dropped = trim_queue_tails(log, queues, start)
    if dropped:
        notes.append(f"dropped {dropped} ConsumeQueue units past the checkpoint that did not match the log")
    whole = checkpoint is None or start != checkpoint.dispatched_offset or start <= log.segments.min_offset()
    short = None if whole or checkpoint is None else _short_queue(checkpoint, queues)
    if short is not None:
        notes.append(f"{short}; rebuilding every ConsumeQueue and the index from the start of the log")
        start = log.segments.min_offset()
        for queue in queues.queues.values():
            queue.truncate_from_physical(start)
    index.truncate_from_physical(start)
    for (topic, queue_id), queue in queues.queues.items():
        log.queue_next[(topic, queue_id)] = queue.max_offset
    scan = _Scan(start=start, end=start, notes=notes,
                 durable_floor=checkpoint.flushed_offset if checkpoint is not None else 0)  # fmt: skip
    _scan_log(log, scan)
    if segments.segments and scan.truncated_at is None and scan.end < scan.durable_floor:
        scan.truncated_at = scan.end  # nothing left to cut, but acknowledged records are gone: say so
        scan.reason = ends_before_floor_reason(scan.end, scan.durable_floor)
    if not segments.segments and checkpoint is not None:
        scan.end = _round_up(checkpoint.flushed_offset, segments.segment_bytes)  # never reuse offsets
    log.write_offset = scan.end
    for segment in log.take_dirty() + [
        s for s in segments.segments if s.base + segments.segment_bytes > start
    ]:
        segment.handle.sync()  # what we serve after restart must be durable, even after a process crash
    return RecoveryReport(
        scanned_from=start, recovered_to=scan.end, records_scanned=scan.records,
        truncated_at=scan.truncated_at, truncated_bytes=scan.truncated_bytes,
        truncated_records=scan.truncated_records, reason=scan.reason,
        rebuilt_queues=len({(e.topic, e.queue_id) for e in log.pending if isinstance(e, DispatchEntry)}),
        duration_ms=clock.monotonic_ms() - started_ms, notes=tuple(scan.notes),
    )  # fmt: skip


def _short_queue(checkpoint: Checkpoint, queues: ConsumeQueueSet) -> str | None:
    """A ConsumeQueue that holds fewer units before the checkpoint's dispatched offset than the
    checkpoint recorded (a file cut, removed or damaged on disk): its records are in the log but no
    consumer would see them. None when every queue is whole (or nothing was recorded)."""
    for topic, queue_id, end in checkpoint.queue_ends or ():
        queue = queues.get(topic, queue_id)
        have = queue.max_offset if queue is not None else 0
        if have < end:
            return f"ConsumeQueue {topic}/{queue_id} ends at {have}, the checkpoint recorded {end}"
    return None


def trim_queue_tails(log: CommitLog, queues: ConsumeQueueSet, start: int) -> int:
    """Cut each ConsumeQueue back to its last unit that is before ``start`` and matches its log record.

    Units for records before the checkpoint's dispatched offset were fsynced; units after it may hold
    anything after a power cut (zeros, a torn or flipped unit), and the binary search of
    ``truncate_from_physical`` assumes increasing offsets. Walking back from the end and checking each
    unit against its (checksummed) record keeps exactly the durable prefix; the scan rebuilds the rest.
    Costs one log read per queue when the tail is clean."""
    limit = log.segments.active.end if log.segments.active else 0
    dropped = 0
    for (topic, queue_id), queue in queues.queues.items():
        while queue.max_offset > queue.min_offset:
            units = queue.units(queue.max_offset - 1, 1)
            last = units[0] if units else None
            if (
                last is not None
                and last.physical_offset < start
                and _unit_matches(log, last, topic, queue_id, limit)
            ):
                break
            queue.drop_last_unit()
            dropped += 1
    return dropped


def _unit_matches(log: CommitLog, unit: QueueUnit, topic: str, queue_id: int, limit: int) -> bool:
    if 0 <= unit.physical_offset < log.segments.min_offset():
        # its segment was removed by retention (synced long before any checkpoint); a zeroed unit
        # (size 0) is still garbage
        return unit.size > 0
    try:
        record = log.read(unit.physical_offset, limit, True)  # a damaged unit is no damaged record
    except TxmqError:
        return False
    return (
        record.topic == topic and record.queue_id == queue_id and record.queue_offset == unit.queue_offset
        and record.size == unit.size
    )  # fmt: skip


def _round_up(offset: int, unit: int) -> int:
    return (offset + unit - 1) // unit * unit


def _scan_start(
    fs: FileSystem, data_dir: str, log: CommitLog, notes: list[str]
) -> tuple[int, Checkpoint | None]:
    segments = log.segments
    log_min = segments.min_offset()
    log_end = segments.active.end if segments.active else 0
    try:
        checkpoint = load_checkpoint(fs, data_dir)
    except CorruptRecord as exc:
        notes.append(f"checkpoint unreadable ({exc.message}); rebuilding from the start of the log")
        return log_min, None
    if checkpoint is None:
        return log_min, None
    if checkpoint.dispatched_offset > log_end and segments.segments:
        notes.append(
            f"checkpoint offset {checkpoint.dispatched_offset} is beyond the end of the log {log_end}; "
            "rebuilding from the start of the log"
        )
        return log_min, checkpoint
    return max(log_min, checkpoint.dispatched_offset), checkpoint


def _scan_log(log: CommitLog, scan: _Scan) -> None:
    segments = log.segments.segments
    segment_bytes = log.segment_bytes
    for i, segment in enumerate(segments):
        if segment.base + segment_bytes <= scan.start:
            continue
        is_tail = i == len(segments) - 1
        position = max(scan.start, segment.base)
        ended_by_marker = False
        for item in scan_segment(segment, position, segment_bytes):
            if isinstance(item, ScanStop):
                _bad_record(segment, item, is_tail, scan)
                break
            if isinstance(item, codec.Blank):
                ended_by_marker = True
                break
            _replay(log, segment, item)
            position = item.physical_offset + item.size
            scan.records += 1
        data_end = segment.base + segment_bytes if ended_by_marker else position
        if (
            not is_tail
            and not ended_by_marker
            and segment.base + segment_bytes - position >= codec.BLANK_BYTES
        ):
            raise CorruptRecord(_mid_log_message(segment, position, "segment data stops before its end "
                                "without an end-of-segment marker"), offset=position)  # fmt: skip
        scan.end = data_end if scan.truncated_at is None else scan.truncated_at


def _replay(log: CommitLog, segment: Segment, record: StoredRecord) -> None:
    log.pending.append(DispatchEntry(
        record.physical_offset, record.size, record.topic, record.queue_id, record.queue_offset,
        record.tags_code, record.store_timestamp_ms, record.properties,
    ))  # fmt: skip
    key = (record.topic, record.queue_id)
    log.queue_next[key] = max(log.queue_next.get(key, 0), record.queue_offset + 1)
    segment.last_store_ms = max(segment.last_store_ms, record.store_timestamp_ms)


def _bad_record(segment: Segment, stop: ScanStop, is_tail: bool, scan: _Scan) -> None:
    """Cut a torn tail (and record what was cut) or raise CorruptRecord for mid-log damage; at zeros
    with only zeros after them (a preallocated tail), just note where the data ends."""
    verdict = judge_stop(segment, stop.offset, stop.zeros, scan.durable_floor)
    if verdict.at_end and is_tail:
        segment.handle.set_end(stop.offset - segment.base)  # the end of the data, zeros prepared after
        return
    following = None if is_tail and verdict.unsynced else verdict.following
    if not is_tail or following is not None:
        detail = f"; a valid record follows at offset {following}" if following is not None else ""
        raise CorruptRecord(_mid_log_message(segment, stop.offset, stop.reason + detail), offset=stop.offset)
    scan.truncated_at = stop.offset
    scan.truncated_bytes = segment.base + segment.handle.prepared() - stop.offset  # prepared zeros too
    scan.truncated_records = count_frames(segment, stop.offset)
    reason = verdict.reason or stop.reason
    scan.reason = f"torn tail in {segment.path} at position {stop.offset - segment.base}: {reason}"
    segment.handle.truncate(stop.offset - segment.base)
    segment.handle.sync()


def count_frames(segment: Segment, offset: int) -> int:
    """Record frames (valid magic) that start in ``segment`` at or after ``offset``, by declared sizes."""
    data = segment.handle.read_at(offset - segment.base, segment.handle.size())
    count, pos = 0, 0
    while len(data) - pos >= codec.BLANK_BYTES:
        try:
            size = codec.frame_size(data, pos, offset + pos)
        except CorruptRecord:
            break
        if not isinstance(size, int):
            break
        count += 1
        pos += size
    return max(count, 1) if data else 0


def _mid_log_message(segment: Segment, offset: int, reason: str) -> str:
    directory = segment.path.rsplit("/commitlog/", 1)[0]
    return (
        f"corrupt record in the middle of the CommitLog: segment {segment.path}, position "
        f"{offset - segment.base} (log offset {offset}): {reason}. The store will not start, to avoid "
        f"dropping the records after it. Run `txmq store verify --data-dir {directory}` to see the "
        f"damage and `txmq store repair --data-dir {directory} --yes` to quarantine it."
    )
