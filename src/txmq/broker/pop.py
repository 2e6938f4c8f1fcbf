"""POP consumption (ReceiveMessage / AckMessage / ChangeInvisibleDuration), RocketMQ 5 semantics.

A group consumes a topic's queues through per-queue state kept in memory: ``base`` (every offset below it
is done; persisted as the group's consumer offset), a scan pointer, the in-flight messages with their
invisibility deadline, and acked offsets above ``base``. A received message is invisible until its
deadline; an ack finishes it; a change of invisible time moves the deadline and issues a new handle.

When a deadline passes without an ack:
* concurrent groups "revive" the message: a copy goes to ``%RETRY%<group>`` with ``RECONSUME_TIME``
  incremented (so attempts survive restarts), and the original is done; after ``max_attempts`` the copy
  goes to ``%DLQ%<group>`` instead;
* FIFO groups redeliver the same message in place (the next message of its message group waits), and
  dead-letter it after ``max_attempts``.

A clean stop keeps the in-flight state (:meth:`PopService.snapshot`, restored at the next start): a
consumer's receipt handles stay valid across the restart and its messages stay invisible until their
deadlines, as the Apache broker's POP checkpoints do. After a crash it is gone: everything after
``base`` is delivered again (at-least-once).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from txmq.broker.filtering import TagFilter
from txmq.broker.offsets import ConsumerOffsets
from txmq.broker.receipt import Receipt, decode_receipt, encode_receipt
from txmq.broker.records import to_view
from txmq.common import errors, limits, names
from txmq.common import properties as props
from txmq.common.message import MessageView
from txmq.storage.api import StoredRecord
from txmq.storage.store import MessageStore

_SCAN_UNITS = 64
_PENDING_FIFO_MAX = 2_048


@dataclass(slots=True)
class InFlight:
    nonce: int
    deadline_ms: int
    attempt: int
    physical_offset: int
    message_group: str | None


@dataclass(slots=True)
class QueueState:
    base: int
    scan: int
    inflight: dict[int, InFlight] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    fifo_pending: dict[int, str | None] = field(default_factory=dict)  # skipped while their group was busy
    fifo_attempts: dict[int, int] = field(default_factory=dict)
    # (deadline_ms, queue_offset, nonce) of every in-flight entry, a min-heap. An ack or a change of
    # invisible time leaves its old item behind: an item counts only while ``inflight`` holds an entry
    # of its offset with its nonce (every lease and change draws a new nonce) and its deadline (an
    # auto-renew extension keeps the nonce, see PopService.extend), and stale items are
    # dropped when they reach the top or when they outnumber the live ones (then the heap is rebuilt).
    deadlines: list[tuple[int, int, int]] = field(default_factory=list)

    def busy_groups(self) -> set[str]:
        return {f.message_group for f in self.inflight.values() if f.message_group is not None}

    def schedule(self, offset: int, entry: InFlight) -> None:
        """Record ``entry``'s (new) deadline; call after every lease and change of invisible time."""
        deadlines = self.deadlines
        if len(deadlines) > 2 * len(self.inflight) + 64:
            deadlines[:] = [(f.deadline_ms, o, f.nonce) for o, f in self.inflight.items()]
            heapq.heapify(deadlines)
            return  # rebuilt from ``inflight``, which holds ``entry`` already
        heapq.heappush(deadlines, (entry.deadline_ms, offset, entry.nonce))

    def due(self, now_ms: int) -> list[tuple[int, InFlight]]:
        """The in-flight entries whose deadline is ``now_ms`` or earlier, by queue offset (still held)."""
        deadlines, inflight = self.deadlines, self.inflight
        found: list[tuple[int, InFlight]] = []
        while deadlines and deadlines[0][0] <= now_ms:
            deadline, offset, nonce = heapq.heappop(deadlines)
            entry = inflight.get(offset)
            if entry is not None and entry.nonce == nonce and entry.deadline_ms == deadline:
                found.append((offset, entry))
        found.sort(key=_by_offset)
        return found

    def next_deadline(self) -> int | None:
        """The earliest deadline of an entry in flight (drops stale items from the top)."""
        deadlines, inflight = self.deadlines, self.inflight
        while deadlines:
            deadline, offset, nonce = deadlines[0]
            entry = inflight.get(offset)
            if entry is not None and entry.nonce == nonce and entry.deadline_ms == deadline:
                return deadline
            heapq.heappop(deadlines)
        return None


def _by_offset(item: tuple[int, InFlight]) -> int:
    return item[0]


@dataclass(frozen=True, slots=True)
class GroupPolicy:
    max_attempts: int = limits.max_delivery_attempts_default
    fifo: bool = False


# (group, original record, decoded properties, attempt) -> awaitable; used to revive or dead-letter
Mover = Callable[[str, StoredRecord, dict[str, str], int], Awaitable[None]]
# topic -> None; told when a message of that topic became deliverable without a new arrival
Releaser = Callable[[str], None]


class PopService:
    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsets,
        *,
        revive: Mover,
        dead_letter: Mover,
        default_policy: GroupPolicy | None = None,
        on_release: Releaser | None = None,
    ) -> None:
        self._store = store
        self._on_release = on_release
        self._default_policy = default_policy or GroupPolicy()
        self._offsets = offsets
        self._revive = revive
        self._dead_letter = dead_letter
        self._queues: dict[tuple[str, str, int], QueueState] = {}
        self._policies: dict[str, GroupPolicy] = {}
        self._nonce = itertools.count(1)
        self._inflight_count: dict[str, int] = {}

    # ---- policy -------------------------------------------------------------------------------
    def set_policy(self, group: str, policy: GroupPolicy) -> None:
        self._policies[group] = policy

    def policy(self, group: str) -> GroupPolicy:
        return self._policies.get(group, self._default_policy)

    # ---- receive ------------------------------------------------------------------------------
    async def receive(
        self,
        group: str,
        topics_queues: list[tuple[str, int]],
        tag_filter: TagFilter,
        batch_size: int,
        invisible_ms: int,
        now_ms: int,
    ) -> list[MessageView]:
        """Deliver up to ``batch_size`` visible messages from the given queues (no waiting)."""
        fifo = self.policy(group).fifo
        result: list[MessageView] = []
        for topic, queue_id in topics_queues:
            if len(result) >= batch_size:
                break
            if self._inflight_count.get(group, 0) >= limits.inflight_per_group_max:
                raise errors.TooManyRequests(
                    f"group {group} has {limits.inflight_per_group_max} messages in flight; ack some first"
                )
            state = self._state(group, topic, queue_id)
            await self._expire(group, topic, queue_id, state, now_ms)
            want = batch_size - len(result)
            if fifo:
                result += await self._take_fifo(
                    group, topic, queue_id, state, tag_filter, want, invisible_ms, now_ms
                )
            else:
                result += await self._take(
                    group, topic, queue_id, state, tag_filter, want, invisible_ms, now_ms
                )
        return result

    async def _take(
        self,
        group: str,
        topic: str,
        queue_id: int,
        state: QueueState,
        tag_filter: TagFilter,
        want: int,
        invisible_ms: int,
        now_ms: int,
    ) -> list[MessageView]:
        taken: list[MessageView] = []
        if tag_filter.match_all:  # every unit is taken: read them in runs (one pread each), not one by one
            while len(taken) < want:
                read = self._store.read_queue(topic, queue_id, state.scan, want - len(taken))
                if not read.records:
                    break
                for record in read.records:
                    decoded = props.decode(record.properties)
                    attempt = int(decoded.get(props.RECONSUME_TIME, "0") or 0) + 1
                    taken.append(
                        self._lease(group, topic, state, record, decoded, attempt, invisible_ms, now_ms, None)
                    )
                state.scan = read.next_offset
            return taken
        while len(taken) < want:
            # the records too, each checked against its unit (a unit damaged on disk is rebuilt from the
            # log): a tags code filtered on without its record would hide a message whose unit flipped
            scanned = self._store.read_queue(topic, queue_id, state.scan, min(_SCAN_UNITS, want * 4)).records
            if not scanned:
                break
            for record in scanned:
                if len(taken) >= want:
                    break
                state.scan = record.queue_offset + 1
                if not tag_filter.matches_hash(record.tags_code):
                    self._finish(group, topic, queue_id, state, record.queue_offset)
                    continue
                decoded = props.decode(record.properties)
                if not tag_filter.matches(decoded.get(props.TAGS)):
                    self._finish(group, topic, queue_id, state, record.queue_offset)
                    continue
                attempt = int(decoded.get(props.RECONSUME_TIME, "0") or 0) + 1
                taken.append(
                    self._lease(group, topic, state, record, decoded, attempt, invisible_ms, now_ms, None)
                )
        return taken

    async def _take_fifo(
        self,
        group: str,
        topic: str,
        queue_id: int,
        state: QueueState,
        tag_filter: TagFilter,
        want: int,
        invisible_ms: int,
        now_ms: int,
    ) -> list[MessageView]:
        """FIFO: within a queue, a message group's next message only after the previous one is done."""
        taken: list[MessageView] = []
        busy = state.busy_groups()
        for offset in sorted(state.fifo_pending):
            if len(taken) >= want:
                return taken
            group_key = state.fifo_pending[offset]
            if group_key is not None and group_key in busy:
                continue
            del state.fifo_pending[offset]
            view = await self._lease_offset(
                group, topic, queue_id, state, offset, tag_filter, invisible_ms, now_ms
            )
            if view is not None:
                taken.append(view)
                if view.message_group is not None:
                    busy.add(view.message_group)
        while len(taken) < want and len(state.fifo_pending) < _PENDING_FIFO_MAX:
            scanned = self._store.read_queue(topic, queue_id, state.scan, _SCAN_UNITS).records  # checked
            if not scanned:
                break
            for record in scanned:
                if len(taken) >= want or len(state.fifo_pending) >= _PENDING_FIFO_MAX:
                    break
                state.scan = record.queue_offset + 1
                if not tag_filter.matches_hash(record.tags_code):
                    self._finish(group, topic, queue_id, state, record.queue_offset)
                    continue
                decoded = props.decode(record.properties)
                message_group = decoded.get(props.SHARDING_KEY) or None
                if message_group is not None and message_group in busy:
                    state.fifo_pending[record.queue_offset] = message_group
                    continue
                if not tag_filter.matches(decoded.get(props.TAGS)):
                    self._finish(group, topic, queue_id, state, record.queue_offset)
                    continue
                attempt = state.fifo_attempts.get(record.queue_offset, 0) + 1
                taken.append(
                    self._lease(
                        group, topic, state, record, decoded, attempt, invisible_ms, now_ms, message_group
                    )
                )
                if message_group is not None:
                    busy.add(message_group)
        return taken

    async def _lease_offset(
        self,
        group: str,
        topic: str,
        queue_id: int,
        state: QueueState,
        offset: int,
        tag_filter: TagFilter,
        invisible_ms: int,
        now_ms: int,
    ) -> MessageView | None:
        records = self._store.read_queue(topic, queue_id, offset, 1).records  # checked against its unit
        if not records:
            return None
        record = records[0]
        decoded = props.decode(record.properties)
        if not tag_filter.matches(decoded.get(props.TAGS)):
            self._finish(group, topic, queue_id, state, offset)
            return None
        attempt = state.fifo_attempts.get(offset, 0) + 1
        return self._lease(
            group,
            topic,
            state,
            record,
            decoded,
            attempt,
            invisible_ms,
            now_ms,
            decoded.get(props.SHARDING_KEY),
        )

    def _lease(
        self,
        group: str,
        topic: str,
        state: QueueState,
        record: StoredRecord,
        decoded: dict[str, str],
        attempt: int,
        invisible_ms: int,
        now_ms: int,
        message_group: str | None,
    ) -> MessageView:
        nonce = next(self._nonce)
        deadline = now_ms + invisible_ms
        offset = record.queue_offset
        entry = state.inflight[offset] = InFlight(
            nonce, deadline, attempt, record.physical_offset, message_group
        )
        state.schedule(offset, entry)
        self._inflight_count[group] = self._inflight_count.get(group, 0) + 1
        handle = encode_receipt(topic, record.queue_id, offset, nonce, deadline)
        return to_view(record, decoded=decoded, delivery_attempt=attempt, receipt_handle=handle)

    # ---- ack / change invisible ---------------------------------------------------------------
    def ack(self, group: str, handle: str) -> None:
        receipt = decode_receipt(handle)
        state = self._queues.get((group, receipt.topic, receipt.queue_id))
        entry = state.inflight.get(receipt.queue_offset) if state else None
        if state is None or entry is None or entry.nonce != receipt.nonce:
            raise errors.InvalidReceiptHandle(
                "the receipt handle has expired or was already used (the message was acked, redelivered "
                "or its invisible time was changed)"
            )
        del state.inflight[receipt.queue_offset]
        self._inflight_count[group] = max(0, self._inflight_count.get(group, 0) - 1)
        state.fifo_attempts.pop(receipt.queue_offset, None)
        self._finish(group, receipt.topic, receipt.queue_id, state, receipt.queue_offset)
        if entry.message_group is not None or state.fifo_pending:
            self._release(receipt.topic)  # the group's next message may be deliverable now

    def change_invisible(self, group: str, handle: str, invisible_ms: int, now_ms: int) -> str:
        receipt = decode_receipt(handle)
        state = self._queues.get((group, receipt.topic, receipt.queue_id))
        entry = state.inflight.get(receipt.queue_offset) if state else None
        if state is None or entry is None or entry.nonce != receipt.nonce:
            raise errors.InvalidReceiptHandle("the receipt handle has expired or was already used")
        entry.nonce = next(self._nonce)
        entry.deadline_ms = now_ms + invisible_ms
        state.schedule(receipt.queue_offset, entry)
        # waiters computed their wake-up from the old deadline; a nack (0) makes the message due now
        self._release(receipt.topic)
        return encode_receipt(
            receipt.topic, receipt.queue_id, receipt.queue_offset, entry.nonce, entry.deadline_ms
        )

    def extend(self, group: str, handle: str, invisible_ms: int, now_ms: int) -> int | None:
        """Keep the message leased under ``handle`` invisible ``invisible_ms`` more from ``now_ms``,
        under the same handle (an auto-renew lease, renewed by the broker as Apache's proxy renews
        it); its new deadline, or None when the handle no longer holds the lease (acked, changed,
        expired)."""
        receipt = decode_receipt(handle)
        state = self._queues.get((group, receipt.topic, receipt.queue_id))
        entry = state.inflight.get(receipt.queue_offset) if state else None
        if state is None or entry is None or entry.nonce != receipt.nonce:
            return None
        entry.deadline_ms = now_ms + invisible_ms
        state.schedule(receipt.queue_offset, entry)
        return entry.deadline_ms

    def deadline_of(self, group: str, handle: str) -> int | None:
        """The deadline of the lease ``handle`` holds, or None when it holds none any more."""
        receipt = decode_receipt(handle)
        state = self._queues.get((group, receipt.topic, receipt.queue_id))
        entry = state.inflight.get(receipt.queue_offset) if state else None
        return None if entry is None or entry.nonce != receipt.nonce else entry.deadline_ms

    def lookup(self, group: str, handle: str) -> tuple[Receipt, InFlight]:
        receipt = decode_receipt(handle)
        state = self._queues.get((group, receipt.topic, receipt.queue_id))
        entry = state.inflight.get(receipt.queue_offset) if state else None
        if entry is None or entry.nonce != receipt.nonce:
            raise errors.InvalidReceiptHandle("the receipt handle has expired or was already used")
        return receipt, entry

    # ---- expiry -------------------------------------------------------------------------------
    async def tick(self, now_ms: int) -> int:
        """Handle every expired in-flight message (revive, redeliver in place, or dead-letter)."""
        handled = 0
        for (group, topic, queue_id), state in list(self._queues.items()):
            handled += await self._expire(group, topic, queue_id, state, now_ms)
        return handled

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (s.next_deadline() for s in self._queues.values()) if d is not None]
        return min(deadlines) if deadlines else None

    async def _expire(self, group: str, topic: str, queue_id: int, state: QueueState, now_ms: int) -> int:
        if not state.deadlines or state.deadlines[0][0] > now_ms:
            return 0
        expired = state.due(now_ms)
        if not expired:
            return 0
        policy = self.policy(group)
        for position, (offset, entry) in enumerate(expired):
            try:
                await self._expire_one(group, topic, queue_id, state, policy, offset, entry)
            except BaseException:
                # the move failed (store fenced, disk full, a write error): this message and the
                # ones after it stay in flight, due again at the next tick. Dropping them here left
                # an offset neither in flight nor done, which no scan or restart delivers again.
                for later_offset, later in expired[position:]:
                    state.schedule(later_offset, later)
                raise
        return len(expired)

    async def _expire_one(
        self, group: str, topic: str, queue_id: int, state: QueueState, policy: GroupPolicy,
        offset: int, entry: InFlight,
    ) -> None:  # fmt: skip
        """Revive, dead-letter or (FIFO) hold for redelivery one expired message; it leaves the
        in-flight set only once its copy is stored."""
        if policy.fifo and entry.attempt < policy.max_attempts:
            self._drop_inflight(group, state, offset)
            state.fifo_attempts[offset] = entry.attempt
            state.fifo_pending[offset] = entry.message_group
            self._release(topic)  # redelivered in place: no arrival will announce it
            return
        record = self._store.read(entry.physical_offset)
        decoded = props.decode(record.properties)
        if entry.attempt >= policy.max_attempts:
            await self._dead_letter(group, record, decoded, entry.attempt)
            state.fifo_attempts.pop(offset, None)
        else:
            await self._revive(group, record, decoded, entry.attempt)
        self._drop_inflight(group, state, offset)
        self._finish(group, topic, queue_id, state, offset)

    def _drop_inflight(self, group: str, state: QueueState, offset: int) -> None:
        del state.inflight[offset]
        self._inflight_count[group] = max(0, self._inflight_count.get(group, 0) - 1)

    async def forward_to_dlq(self, group: str, handle: str) -> None:
        _receipt, entry = self.lookup(group, handle)
        record = self._store.read(entry.physical_offset)
        await self._dead_letter(group, record, props.decode(record.properties), entry.attempt)
        self.ack(group, handle)

    # ---- bookkeeping --------------------------------------------------------------------------
    def _release(self, topic: str) -> None:
        """Wake long polls on ``topic``: FIFO deliverability changes without any new arrival (an ack,
        a nack, a dead-letter move or an in-place redelivery frees a message group's next message)."""
        if self._on_release is not None:
            self._on_release(topic)

    def _state(self, group: str, topic: str, queue_id: int) -> QueueState:
        key = (group, topic, queue_id)
        state = self._queues.get(key)
        if state is None:
            saved = self._offsets.get(group, topic, queue_id)
            low = self._store.min_offset(topic, queue_id)
            high = self._store.max_offset(topic, queue_id)
            if saved is not None and saved > high:
                # an offset past the queue's end (committed by a client, or the log lost its unflushed
                # tail): start at the end and commit it, as Apache's POP corrects it; kept, the
                # messages appended below it would never be delivered
                saved = high
                self._offsets.set(group, topic, queue_id, high)
            base = low if saved is None else max(saved, low)
            state = QueueState(base=base, scan=base)
            self._queues[key] = state
        elif state.scan < self._store.min_offset(topic, queue_id):
            state.scan = state.base = self._store.min_offset(topic, queue_id)
        return state

    def _finish(self, group: str, topic: str, queue_id: int, state: QueueState, offset: int) -> None:
        if offset < state.base:
            return
        state.acked.add(offset)
        moved = False
        while state.base in state.acked:
            state.acked.discard(state.base)
            state.base += 1
            moved = True
        if moved:
            self._offsets.advance(group, topic, queue_id, state.base)

    def reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Forget in-memory state (an operator reset the group's offset)."""
        self._queues.pop((group, topic, queue_id), None)
        self._offsets.set(group, topic, queue_id, offset)

    def inflight_of(self, group: str) -> int:
        return self._inflight_count.get(group, 0)

    # ---- across a clean restart ---------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Every queue's state beyond its consumer offset (leases, acks above the offset, FIFO waits),
        the group policies and the next nonce, as JSON values, for :meth:`restore` after a clean stop.
        A queue with none of those has ``scan == base`` and is rebuilt from its offset anyway."""
        queues: list[dict[str, Any]] = []
        for (group, topic, queue_id), state in self._queues.items():
            if not (state.inflight or state.acked or state.fifo_pending or state.fifo_attempts):
                continue
            leases = [
                [offset, f.nonce, f.deadline_ms, f.attempt, f.physical_offset, f.message_group]
                for offset, f in sorted(state.inflight.items())
            ]
            queues.append(
                {
                    "group": group, "topic": topic, "queue_id": queue_id, "base": state.base,
                    "scan": state.scan, "inflight": leases, "acked": sorted(state.acked),
                    "fifo_pending": [[o, state.fifo_pending[o]] for o in sorted(state.fifo_pending)],
                    "fifo_attempts": [[o, state.fifo_attempts[o]] for o in sorted(state.fifo_attempts)],
                }
            )  # fmt: skip
        policies = {g: [p.max_attempts, p.fifo] for g, p in self._policies.items()}
        return {"version": 1, "next_nonce": next(self._nonce), "policies": policies, "queues": queues}

    def restore(self, saved: Any) -> int:
        """Take back what :meth:`snapshot` gave (call before any receive); returns the leases restored.
        A queue whose base no longer matches its consumer offset or the queue's minimum is skipped:
        its messages are delivered again, as after a crash."""
        if not isinstance(saved, dict) or saved.get("version") != 1:
            return 0
        self._nonce = itertools.count(max(1, int(saved["next_nonce"])))
        for group, (max_attempts, fifo) in saved["policies"].items():
            self._policies.setdefault(str(group), GroupPolicy(int(max_attempts), bool(fifo)))
        restored = 0
        for item in saved["queues"]:
            group, topic, queue_id = str(item["group"]), str(item["topic"]), int(item["queue_id"])
            base = int(item["base"])
            offset_now = self._offsets.get(group, topic, queue_id)
            low = self._store.min_offset(topic, queue_id)
            if base != (low if offset_now is None else max(offset_now, low)):
                continue
            state = QueueState(base=base, scan=max(base, int(item["scan"])))
            for offset, nonce, deadline, attempt, physical, message_group in item["inflight"]:
                entry = InFlight(int(nonce), int(deadline), int(attempt), int(physical), message_group)
                state.inflight[int(offset)] = entry
                state.schedule(int(offset), entry)
            state.acked = {int(o) for o in item["acked"]}
            state.fifo_pending = {int(o): g for o, g in item["fifo_pending"]}
            state.fifo_attempts = {int(o): int(n) for o, n in item["fifo_attempts"]}
            self._queues[(group, topic, queue_id)] = state
            self._inflight_count[group] = self._inflight_count.get(group, 0) + len(state.inflight)
            restored += len(state.inflight)
        return restored


def retry_and_dlq_names(group: str) -> tuple[str, str]:
    return names.retry_topic(group), names.dlq_topic(group)
