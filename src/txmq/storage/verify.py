"""Offline checks and repair of a store directory (``txmq store verify`` / ``txmq store repair``).

``verify_store`` walks every record of every segment and checks every CRC, then (when the log is
sound) checks every ConsumeQueue unit the checkpoint covers against the record it names, without
changing anything. ``repair_store`` cuts a torn tail, and for mid-log corruption first copies every affected
segment to ``<data_dir>/quarantine/`` and then (only when confirmed) truncates at the bad record,
reporting exactly how many records and bytes after it are lost. ConsumeQueues, the index and the
checkpoint are then removed so the next open rebuilds them from the log (also all that is done when
only ConsumeQueue units are damaged).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from txmq.common.errors import CorruptRecord
from txmq.storage import codec
from txmq.storage.api import StoredRecord
from txmq.storage.checkpoint import CHECKPOINT_FILE, load_checkpoint, load_layout
from txmq.storage.consume_queue import UNIT, UNIT_BYTES
from txmq.storage.fs import FileSystem
from txmq.storage.segment import (
    Segment,
    SegmentList,
    ends_before_floor_reason,
    has_valid_record_after,
    holds_record,
    judge_stop,
    parse_segment_name,
    scan_segment,
    zeros_from,
)


@dataclass(frozen=True, slots=True)
class Problem:
    segment: str
    position: int  # byte position inside the segment file
    offset: int  # log offset
    reason: str
    torn_tail: bool  # True: recovery would cut it; False: mid-log corruption
    records_after: int  # valid records after the bad one (lost if truncated there)
    bytes_after: int  # bytes from the bad record to the end of the log


@dataclass(frozen=True, slots=True)
class QueueProblem:
    """A ConsumeQueue unit that does not name its record (damaged on disk; rebuilt from the log)."""

    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int  # the unit's fields as found
    size: int
    tags_code: int
    reason: str


@dataclass(slots=True)
class VerifyReport:
    data_dir: str
    segment_bytes: int
    segments: int = 0
    records: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    checkpoint: str = "missing"
    problems: list[Problem] = field(default_factory=list)
    queue_units: int = 0  # ConsumeQueue units checked against the log
    queue_problems: list[QueueProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.queue_problems

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def open_segments(fs: FileSystem, data_dir: str, segment_bytes: int | None) -> SegmentList:
    pinned = load_layout(fs, data_dir)
    size = pinned if pinned is not None else segment_bytes
    if size is None:
        raise CorruptRecord(f"{data_dir} has no layout file; pass the segment size explicitly")
    segments = SegmentList(fs, posixpath.join(data_dir, "commitlog"), size)
    segments.load()
    return segments


def verify_store(fs: FileSystem, data_dir: str, segment_bytes: int | None = None) -> VerifyReport:
    """Walk every record; never modifies anything."""
    segments = open_segments(fs, data_dir, segment_bytes)
    try:
        report = VerifyReport(data_dir, segments.segment_bytes, segments=len(segments.segments))
        report.checkpoint = _checkpoint_state(fs, data_dir)
        floor = _durable_floor(fs, data_dir)
        end = 0
        for i, segment in enumerate(segments.segments):
            end = max(end, _verify_segment(segments, i, segment, report, floor))
        if not report.problems and segments.segments and end < floor:
            tail = segments.segments[-1]  # as recovery judges it: fsynced records are missing
            report.problems.append(
                Problem(tail.path, end - tail.base, end, ends_before_floor_reason(end, floor), True, 0, 0)
            )
        if not report.problems:  # a damaged log makes repair rebuild every queue anyway
            _verify_queues(fs, data_dir, segments, report)
        return report
    finally:
        segments.close()


def _verify_queues(fs: FileSystem, data_dir: str, segments: SegmentList, report: VerifyReport) -> None:
    """Check every ConsumeQueue unit the checkpoint says is durable (its recorded queue ends, else the
    units of records before its dispatched offset; units after that are rebuilt at open) against the
    record it names: there, of that size, tags code, topic, queue id and queue offset."""
    try:
        checkpoint = load_checkpoint(fs, data_dir)
    except CorruptRecord:
        return
    if checkpoint is None:
        return  # the next open rebuilds every queue from the start of the log
    ends = {(t, q): n for t, q, n in checkpoint.queue_ends} if checkpoint.queue_ends is not None else None
    log_min = segments.min_offset()
    root = posixpath.join(data_dir, "consumequeue")
    for topic in sorted(fs.list_dir(root)):
        for queue_name in sorted(fs.list_dir(posixpath.join(root, topic))):
            if not queue_name.isdecimal():
                continue
            queue_id = int(queue_name)
            end = ends.get((topic, queue_id), 0) if ends is not None else None
            for queue_offset, unit in _queue_units(fs, posixpath.join(root, topic, queue_name)):
                if end is not None and queue_offset >= end:
                    break
                physical_offset, size, tags_code = unit
                if end is None and physical_offset >= checkpoint.dispatched_offset:
                    continue
                if 0 <= physical_offset < log_min and size > 0:
                    continue  # its segment was removed by retention
                report.queue_units += 1
                reason = _unit_mismatch(segments, topic, queue_id, queue_offset, unit)
                if reason is not None:
                    report.queue_problems.append(
                        QueueProblem(topic, queue_id, queue_offset, physical_offset, size, tags_code, reason)
                    )


def _queue_units(fs: FileSystem, directory: str) -> Iterator[tuple[int, tuple[int, int, int]]]:
    """``(queue offset, (log offset, size, tags code))`` of every whole unit in a queue's files."""
    names = fs.list_dir(directory)
    files = sorted((base, name) for name in names if (base := parse_segment_name(name)) is not None)
    for base, name in files:
        handle = fs.open(posixpath.join(directory, name))
        try:
            data = handle.read_at(0, handle.size() // UNIT_BYTES * UNIT_BYTES)
        finally:
            handle.close()
        for i, unit in enumerate(UNIT.iter_unpack(data)):
            yield base + i, unit


def _unit_mismatch(
    segments: SegmentList, topic: str, queue_id: int, queue_offset: int, unit: tuple[int, int, int]
) -> str | None:
    """Why the unit does not name its record (None when it does)."""
    physical_offset, size, tags_code = unit
    segment = segments.locate(physical_offset) if physical_offset >= 0 else None
    if segment is None:
        return f"log offset {physical_offset} is not in the log"
    position = physical_offset - segment.base
    header = segment.handle.read_at(position, codec.HEADER_BYTES)
    if len(header) < codec.HEADER_BYTES:
        return f"no record starts at log offset {physical_offset}"
    magic, stored_size = codec.HEADER.unpack(header)[:2]
    if magic != codec.MAGIC or stored_size != size:
        return f"no record of {size} bytes starts at log offset {physical_offset}"
    try:
        record = codec.decode(segment.handle.read_at(position, size), 0, offset=physical_offset)
    except CorruptRecord as exc:
        return f"the record at log offset {physical_offset} is damaged: {exc.message}"
    found = (record.topic, record.queue_id, record.queue_offset, record.tags_code)
    if found != (topic, queue_id, queue_offset, tags_code):
        return (
            f"the record at log offset {physical_offset} is {record.topic}/{record.queue_id} queue offset "
            f"{record.queue_offset} tags code {record.tags_code}, not this unit's"
        )
    return None


def _checkpoint_state(fs: FileSystem, data_dir: str) -> str:
    try:
        checkpoint = load_checkpoint(fs, data_dir)
    except CorruptRecord as exc:
        return f"unreadable: {exc.message}"
    return "missing" if checkpoint is None else f"ok (dispatched to {checkpoint.dispatched_offset})"


def _durable_floor(fs: FileSystem, data_dir: str) -> int:
    """The checkpoint's flushed offset (everything before it was fsynced), 0 if unknown."""
    try:
        checkpoint = load_checkpoint(fs, data_dir)
    except CorruptRecord:
        return 0
    return checkpoint.flushed_offset if checkpoint is not None else 0


def _verify_segment(
    segments: SegmentList, index: int, segment: Segment, report: VerifyReport, floor: int
) -> int:
    """Check one segment; where its data ends (its end with an end marker)."""
    size = segments.segment_bytes
    holding = [i for i, s in enumerate(segments.segments) if holds_record(s)]
    is_tail = index == (holding[-1] if holding else 0)
    position = segment.base
    marker = False
    for item in scan_segment(segment, segment.base, size):
        if isinstance(item, codec.Blank):
            marker = True
            break
        if not isinstance(item, StoredRecord):
            verdict = judge_stop(segment, item.offset, item.zeros, floor)  # as recovery judges it
            if verdict.at_end:
                break  # the end of the data of a preallocated segment: only zeros after it
            tail = is_tail and (verdict.following is None or verdict.unsynced)
            report.problems.append(
                _problem(segments, segment, item.offset, verdict.reason or item.reason, tail)
            )
            return item.offset
        report.records += 1
        report.bytes += item.size
        report.first_offset = item.physical_offset if report.first_offset is None else report.first_offset
        report.last_offset = item.physical_offset
        position = item.physical_offset + item.size
    later_data = any(i > index for i in holding)
    if not marker and later_data and segment.base + size - position >= codec.BLANK_BYTES:
        reason = "segment data stops before its end without an end-of-segment marker"
        report.problems.append(_problem(segments, segment, position, reason, False))
    return segment.base + size if marker else position


def _problem(segments: SegmentList, segment: Segment, offset: int, reason: str, tail: bool) -> Problem:
    records, size = count_after(segments, segment, offset)
    return Problem(segment.path, offset - segment.base, offset, reason, tail, records, size)


def count_after(segments: SegmentList, segment: Segment, offset: int) -> tuple[int, int]:
    """Valid records after the bad one at ``offset``, and bytes from it to the end of the log."""
    records = 0
    next_valid = has_valid_record_after(segment, offset)
    if next_valid is not None:
        records += sum(
            1 for item in scan_segment(segment, next_valid, segments.segment_bytes)
            if isinstance(item, StoredRecord)
        )  # fmt: skip
    later = [s for s in segments.segments if s.base > segment.base]
    for other in later:
        records += sum(
            1
            for item in scan_segment(other, other.base, segments.segment_bytes)
            if isinstance(item, StoredRecord)
        )
    size = zeros_from(segment, offset) - offset + sum(s.handle.size() for s in later)
    return records, size


@dataclass(slots=True)
class RepairResult:
    actions: list[str] = field(default_factory=list)
    records_lost: int = 0
    bytes_lost: int = 0
    needs_confirmation: bool = False


def repair_store(
    fs: FileSystem, data_dir: str, *, confirm: bool, segment_bytes: int | None = None
) -> RepairResult:
    """Cut a torn tail; quarantine (and, if ``confirm``, truncate at) the first mid-log corruption."""
    report = verify_store(fs, data_dir, segment_bytes)
    result = RepairResult()
    if report.ok:
        result.actions.append("no problems found; nothing to repair")
        return result
    if not report.problems:  # the log is sound, some ConsumeQueue units are not
        result.actions.append(f"{len(report.queue_problems)} ConsumeQueue unit(s) do not name their records")
        _drop_derived(fs, data_dir, result)
        return result
    problem = report.problems[0]
    segments = open_segments(fs, data_dir, segment_bytes)
    try:
        affected = [s for s in segments.segments if s.base >= problem.offset - problem.position]
        if not problem.torn_tail:
            _quarantine(fs, data_dir, affected, result)
            result.records_lost, result.bytes_lost = problem.records_after, problem.bytes_after
            if not confirm:
                result.needs_confirmation = True
                result.actions.append(
                    f"NOT truncated: truncating at log offset {problem.offset} would lose "
                    f"{problem.records_after} valid record(s) and {problem.bytes_after} bytes; "
                    "rerun with --yes"
                )
                return result
        _truncate_at(segments, affected, problem, result)
    finally:
        segments.close()
    _drop_derived(fs, data_dir, result)
    return result


def _quarantine(fs: FileSystem, data_dir: str, affected: list[Segment], result: RepairResult) -> None:
    directory = posixpath.join(data_dir, "quarantine")
    fs.makedirs(directory)
    for segment in affected:
        target = posixpath.join(directory, posixpath.basename(segment.path))
        if fs.exists(target):
            fs.remove(target)
        copy = fs.open(target)
        try:
            position = 0
            while position < segment.handle.size():
                chunk = segment.handle.read_at(position, 1 << 20)
                copy.append(chunk)
                position += len(chunk)
            copy.sync()
        finally:
            copy.close()
        result.actions.append(f"copied {segment.path} to {target}")
    fs.sync_dir(directory)


def _truncate_at(
    segments: SegmentList, affected: list[Segment], problem: Problem, result: RepairResult
) -> None:
    bad = affected[0]
    bad.handle.truncate(problem.position)
    bad.handle.sync()
    result.actions.append(f"truncated {bad.path} at position {problem.position} ({problem.reason})")
    for segment in affected[1:]:
        segments.segments.remove(segment)
        segment.handle.close()
        segments.fs.remove(segment.path)
        result.actions.append(f"removed {segment.path}")
    if problem.torn_tail:
        result.bytes_lost = problem.bytes_after


def _drop_derived(fs: FileSystem, data_dir: str, result: RepairResult) -> None:
    """Remove ConsumeQueues, index and checkpoint so the next open rebuilds them from the log."""
    for sub in ("consumequeue", "index"):
        _remove_tree(fs, posixpath.join(data_dir, sub))
    checkpoint = posixpath.join(data_dir, CHECKPOINT_FILE)
    if fs.exists(checkpoint):
        fs.remove(checkpoint)
    result.actions.append("removed ConsumeQueues, index and checkpoint (rebuilt from the log on open)")


def _remove_tree(fs: FileSystem, path: str) -> None:
    for name in fs.list_dir(path):
        child = posixpath.join(path, name)
        if fs.is_dir(child):
            _remove_tree(fs, child)
        else:
            fs.remove(child)
    if fs.is_dir(path):
        fs.remove_dir(path)
