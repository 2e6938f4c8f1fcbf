"""The transaction service: decisions on half messages and check-back, with a durable history.

Storage layout (all internal topics on the one CommitLog):

* a half message is a record in ``RMQ_SYS_TRANS_HALF_TOPIC`` (queue 0), written by the send path; its
  queue unit's tags code is the broker time it arrived, so finding what is old enough needs no log read;
* every event about it (check sent, answer, decision, conflict, discard, resume) is an op record in
  ``RMQ_SYS_TRANS_OP_HALF_TOPIC``: body = :class:`TxnEvent`, key ``%TXOP%<half offset>`` in the index, so
  ``txmq tx show`` and late decisions find a message's whole history without scanning;
* COMMIT appends the real message **and** its DECISION op record in one atomic batch (never one without
  the other); ROLLBACK appends only the op record;
* a discarded half message is also copied to ``TRANS_CHECK_MAX_TIME_TOPIC``.

In memory: a cursor over the half queue (everything before it was examined once its timeout passed),
the messages past the cursor still pending or discarded (``_watched``, with a due-time heap), and folded
histories of messages the cursor has not reached yet (``_early``: decisions arrive within the timeout,
so this holds about rate x timeout entries). The cost of a round grows with what is due, not with what is
pending. A snapshot (cursor, watched, op offset applied, and ``early_from``: the op queue offset from which
the op records rebuild ``_early``) is saved periodically, when it changed; at start the op records are
replayed from ``early_from``, those before the offset applied only into ``_early``, so nothing is counted
twice and nothing is forgotten. The early records themselves are not in the snapshot: it stays as small
as what is watched, not rate x timeout records rewritten every second, and an idle broker writes nothing.

The decision rules are pure functions in :mod:`.model` and :mod:`.decide`; this module does the I/O.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from txmq.broker.records import keys_of, split_host, to_view
from txmq.broker.reput import committed_fields, to_real_topic
from txmq.common import errors, limits, msgid, names
from txmq.common import properties as props
from txmq.common.clock import now_ms_of
from txmq.common.fastinit import tuple_maker
from txmq.common.message import MessageView
from txmq.storage.api import AppendResult, RecordFields, StoredRecord, StoredTuple

from .decide import ActionKind, CheckPolicy, HalfView, decide, immunity_ms_from_property, next_due_ms
from .history import EventKind, TxnEvent, TxnRecord, encode_event, fold, new_event, step
from .model import Decision, DecisionSource, OutcomeKind, TxnState, apply_decision
from .rounds import START, DueSchedule, RoundCursor, plan_round

if TYPE_CHECKING:
    from txmq.broker.broker import Broker
    from txmq.broker.persist import MetaFiles

log = logging.getLogger(__name__)

_FILE = "transactions.json"
_HALF_PROPERTY: Final = "__TXMQ_HALF"
_CURSOR_UNITS = 512
_SAVE_EVERY_MS = 1_000
_NEW: Final = TxnRecord()  # frozen: one shared "nothing happened yet"
_SEP: Final = props.NAME_VALUE_SEPARATOR
_END: Final = props.PROPERTY_SEPARATOR
_OP_TOPIC_BYTES: Final = names.OP_HALF_TOPIC.encode()
_HALF_TOPIC_BYTES: Final = names.HALF_TOPIC.encode()
_OP_TAGS: Final = f"{props.TAGS}{_SEP}d{_END}"


_RESOLVED_MAX: Final = 65_536  # recently resolved halves remembered (far more than the index can lag)


def op_key(half_offset: int) -> str:
    return f"%TXOP%{half_offset}"


@dataclass(slots=True)
class Watch:
    """A half message past the cursor that is not resolved yet."""

    record: TxnRecord
    queue_offset: int
    immunity_ms: int | None
    producer_group: str
    real_topic: str


class _DecisionTurn:
    """One half message's turn to decide: held by one decision while it is in ``_deciding``; the
    decisions that arrive meanwhile wait in ``waiting``, first come first served. No lock object: the
    producer's own decision (nearly always alone) takes the turn without a coroutine or a future."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        # made when a second decision comes to wait (rare): none per lone decision
        self.waiting: deque[asyncio.Future[None]] | None = None


class _Pending(NamedTuple):
    """A decision appended (not yet durable): what to reflect in memory once it is."""

    durable: Awaitable[None]
    half_offset: int
    event: TxnEvent
    op_queue_offset: int
    error: errors.TxmqError | None  # raised once the record is durable (a CONFLICT)


_HEX_BYTES_MAX: Final = (1 << 62) - 1  # a short int to compiled code; every real log offset is below

EndFinish = Callable[[BaseException | None], None]
"""Completes a decision started by :meth:`TransactionService.end_nowait` once its records are
durable (``None``) or failed (the exception): reflects it in memory, passes the turn on, and raises
what the decision answers (the write's error, a conflict)."""


class TransactionService:
    def __init__(self, broker: Broker, meta: MetaFiles) -> None:
        self._broker = broker
        self._store = broker.store
        self._clock = broker.clock
        self._meta = meta
        config = broker.config
        self.policy = CheckPolicy(
            transaction_timeout_ms=config.transaction_timeout_ms,
            check_interval_ms=config.transaction_check_interval_ms,
            check_max=config.transaction_check_max,
        )
        self._cursor = 0  # next half queue offset to examine
        self._op_applied = 0  # op queue offsets below this are reflected in memory
        self._watched: dict[int, Watch] = {}
        self._early: dict[int, TxnRecord] = {}
        # (op queue offset, half offset) of each op that started an early record, oldest first: the
        # first whose half is still early is where a restart replays the op log from (``early_from``)
        self._early_starts: deque[tuple[int, int]] = deque()
        # watched halves just resolved: their op records may not be in the key index yet (dispatch is
        # asynchronous), and a decision arriving meanwhile (a check-back answer racing the producer's
        # commit) must see the resolution, not an empty op log (PENDING: committed twice). Bounded.
        self._resolved: OrderedDict[int, TxnRecord] = OrderedDict()
        self._schedule = DueSchedule()
        self._round_cursor: RoundCursor = START
        self._last_save_ms = 0
        self._saved_payload: bytes | None = None  # the snapshot last written
        self._deciding: dict[int, _DecisionTurn] = {}  # one decision at a time per half message
        # the last kept half a decision took under its own id, and that id (transaction_id_of's value)
        self._taken_id: tuple[int, str] = (-1, "")
        # halves just stored, by offset, as the log holds them (with their properties and the cut of
        # their routing pairs, -1 if unknown), until their END_TRANSACTION takes them: the decision then
        # reads nothing back (bounded, oldest out first)
        self._halves: OrderedDict[int, tuple[StoredTuple, dict[str, str], int]] = OrderedDict()
        self._halves_bytes = 0  # their bodies and properties
        # their transaction ids (as half_stored gave them) -> their offsets: parsing an id costs more
        self._half_ids: dict[str, int] = {}
        # their bounds, read once (compiled code inlines limits' Final values: tests change these)
        self._halves_max = limits.transaction_half_cache_max
        self._halves_bytes_max = limits.transaction_half_cache_bytes_max
        self._store_host = self._store.config.store_host
        broker.sender.half_stored = self.half_stored
        self.checks_sent = 0
        self.discarded = 0
        host, port = split_host(self._store.config.store_host)
        self._txid_prefix = msgid.offset_message_id(host, port, 0)[:16]  # ip and port: fixed per broker

    # ---- identity ------------------------------------------------------------------------------
    def transaction_id_of(self, half_offset: int) -> str:
        """The offset message id of the half message (``msgid.offset_message_id``, prefix cached):
        a log offset's 16 hex digits by its 8 big-endian bytes' ``hex()`` (``%016X`` of it; the
        ``%`` format itself cost ~1.7k instructions compiled), ``%016X`` for anything else."""
        if 0 <= half_offset <= _HEX_BYTES_MAX:
            return self._txid_prefix + half_offset.to_bytes(8, "big").hex().upper()
        return self._txid_prefix + "%016X" % half_offset  # noqa: UP031 - the reference

    def kept_half_offset(self, transaction_id: str) -> int:
        """The half offset ``transaction_id`` names when it is the id of a kept half as
        :meth:`half_stored` gave it (what ``msgid.parse_offset_message_id`` reads out of it), else -1
        (then parse it): a dict lookup instead of a hex parse per END_TRANSACTION."""
        return self._half_ids.get(transaction_id, -1)

    def _half_offset(self, transaction_id: str) -> int:
        parsed = msgid.parse_offset_message_id(transaction_id)
        if parsed is None:
            raise errors.InvalidTransactionId(f"{transaction_id!r} is not a txmq transaction id")
        return parsed[2]

    def half_stored(
        self, fields: RecordFields, properties: dict[str, str], appended: AppendResult, cut: int = -1
    ) -> str:
        """Keep a half message the send path just stored (its write succeeded, so nothing rolls it
        back): the record :meth:`MessageStore.read` would return at ``appended.physical_offset``, and
        ``properties``, what ``fields.properties`` encodes; ``cut`` (``HalfAppend.cut``): where the
        routing pairs that end ``fields.properties`` start, -1 when unknown (the commit then finds
        them, ``reput.committed_fields``). At most ``limits.transaction_half_cache_max``
        halves and ``_bytes_max`` bytes (``_halves_max``, ``_halves_bytes_max``). Returns its
        transaction id (:meth:`transaction_id_of`), which names it to :meth:`kept_half_offset`."""
        offset = appended.physical_offset
        transaction_id = self.transaction_id_of(offset)
        size = len(fields.body) + len(fields.properties)
        if fields.topic != _HALF_TOPIC_BYTES or size > self._halves_bytes_max:
            return transaction_id
        halves = self._halves
        ids = self._half_ids
        while halves and (
            len(halves) >= self._halves_max or self._halves_bytes + size > self._halves_bytes_max
        ):  # the oldest out: O(1) (a dict's first key is a scan past the keys deleted before it)
            old_offset, (old, _, _) = halves.popitem(last=False)
            self._halves_bytes -= len(old.body) + len(old.properties)
            ids.pop(self.transaction_id_of(old_offset), None)
        if len(ids) > 2 * self._halves_max:  # ids of halves taken under another spelling: a memo only
            ids.clear()
        ids[transaction_id] = offset
        self._halves_bytes += size
        # one C call: no interpreted __init__ (a StoredRecord's, a NamedTuple's __new__) per half
        record: StoredTuple = _MAKE_STORED_TUPLE(
            appended.physical_offset, appended.size, names.HALF_TOPIC, fields.queue_id,
            appended.queue_offset, fields.body, fields.properties, fields.tags_code, fields.flag,
            fields.sys_flag, fields.born_timestamp_ms, fields.born_host.decode(),
            appended.store_timestamp_ms, self._store_host, fields.reconsume_times,
            fields.prepared_transaction_offset,
        )  # fmt: skip
        halves[offset] = (record, properties, cut)
        return transaction_id

    def _read_half(self, half_offset: int) -> StoredRecord:
        try:
            record = self._store.read(half_offset)
        except (errors.TxmqError, ValueError):
            raise errors.InvalidTransactionId(f"no half message at offset {half_offset}") from None
        if record.topic != names.HALF_TOPIC:
            raise errors.InvalidTransactionId(f"offset {half_offset} is not a half message")
        return record

    # ---- decisions -----------------------------------------------------------------------------
    async def end(
        self,
        *,
        topic: str,
        message_id: str,
        transaction_id: str,
        commit: bool | None,
        from_check: bool,
        client_id: str = "",
        operator: bool = False,
    ) -> None:
        """Apply a producer's (or an operator's) decision; the first terminal decision wins."""
        half_offset, half, decoded, cut = self._take_half(topic, message_id, transaction_id)
        await self._end_in_turn(
            half_offset, half, decoded, transaction_id, commit, from_check, client_id, operator, cut
        )

    def end_nowait(
        self,
        *,
        topic: str,
        message_id: str,
        transaction_id: str,
        commit: bool | None,
        from_check: bool,
        client_id: str = "",
        half_offset: int = -1,
    ) -> tuple[Awaitable[None], EndFinish] | Coroutine[Any, Any, None] | None:
        """:meth:`end` for a caller on the event loop that can wait for a future without a task (the
        remoting door). When no other decision on the half holds its turn, it decides and appends
        now and returns the awaitable that completes once the records are durable (add done
        callbacks to it, never await it: it may be the write group's one future, shared with other
        appends) and the function to call then (``EndFinish``), or None if the decision records
        nothing (a duplicate); else the coroutine of :meth:`end`, which waits its turn. Raises what
        :meth:`end` raises before anything is appended. ``half_offset``: the offset ``transaction_id``
        names, when the caller parsed it already (else -1: parsed here)."""
        half_offset, half, decoded, cut = self._take_half(topic, message_id, transaction_id, half_offset)
        if half_offset in self._deciding:
            return self._end_in_turn(
                half_offset, half, decoded, transaction_id, commit, from_check, client_id, False, cut
            )
        turn = self._deciding[half_offset] = _DecisionTurn()
        try:
            pending = self._decision(
                half_offset, half, decoded, transaction_id, commit, from_check, client_id, False, True, cut
            )
        except BaseException:
            self._pass_turn(half_offset, turn)
            raise
        if pending is None:
            self._pass_turn(half_offset, turn)
            return None
        return pending.durable, functools.partial(self._finish_turn, turn, pending)

    def _finish_turn(self, turn: _DecisionTurn, pending: _Pending, failure: BaseException | None) -> None:
        try:
            if failure is not None:
                raise failure
            self._finish(pending)
        finally:
            self._pass_turn(pending.half_offset, turn)

    def _take_half(
        self, topic: str, message_id: str, transaction_id: str, half_offset: int = -1
    ) -> tuple[int, StoredTuple, dict[str, str], int]:
        """The half message a decision names (kept from its send, else read back), checked against the
        decision's message id and topic (``half_offset``: as for :meth:`end_nowait`), and the cut of
        its properties' routing pairs (:meth:`half_stored`; -1 when read back)."""
        if half_offset < 0:
            half_offset = self._half_offset(transaction_id)
        kept = self._halves.pop(half_offset, None)
        cut = -1
        if kept is None:
            half = StoredTuple.of(self._read_half(half_offset))
            decoded = props.decode(half.properties)
        else:
            half, decoded, cut = kept
            self._halves_bytes -= len(half.body) + len(half.properties)
            if self._half_ids.pop(transaction_id, -1) == half_offset:  # its id as half_stored formatted it
                self._taken_id = (half_offset, transaction_id)
        if message_id and decoded.get(props.UNIQ_KEY) not in (message_id, None):
            raise errors.InvalidTransactionId(
                f"transaction {transaction_id} belongs to message {decoded.get(props.UNIQ_KEY)}, "
                f"not {message_id}"
            )
        if topic and decoded.get(props.REAL_TOPIC) not in (topic, None):
            raise errors.InvalidTransactionId(
                f"transaction {transaction_id} belongs to another topic than {topic}"
            )
        return half_offset, half, decoded, cut

    async def _end_in_turn(
        self,
        half_offset: int,
        half: StoredTuple,
        decoded: dict[str, str],
        transaction_id: str,
        commit: bool | None,
        from_check: bool,
        client_id: str,
        operator: bool,
        cut: int = -1,
    ) -> None:
        """Decide once no other decision on the half holds its turn (one at a time per half message:
        the second sees what the first stored)."""
        turn = await self._take_turn(half_offset)
        try:
            await self._decide(
                half_offset, half, decoded, transaction_id, commit, from_check, client_id, operator, cut
            )
        finally:
            self._pass_turn(half_offset, turn)

    async def _take_turn(self, half_offset: int) -> _DecisionTurn:
        turn = self._deciding.get(half_offset)
        if turn is None:
            turn = self._deciding[half_offset] = _DecisionTurn()
            return turn
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting = turn.waiting
        if waiting is None:
            waiting = turn.waiting = deque()
        waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed the turn as it was cancelled
                self._pass_turn(half_offset, turn)
            raise  # a cancelled waiter left in the queue is skipped by _pass_turn
        return turn

    def _pass_turn(self, half_offset: int, turn: _DecisionTurn) -> None:
        """Hand the turn to the first decision still waiting, or free it: the turn leaves the map only
        when no decision waits, so one arriving meanwhile queues behind the woken one."""
        waiting = turn.waiting
        while waiting is not None and waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        del self._deciding[half_offset]

    async def _decide(
        self,
        half_offset: int,
        half: StoredTuple,
        decoded: dict[str, str],
        transaction_id: str,
        commit: bool | None,
        from_check: bool,
        client_id: str,
        operator: bool,
        cut: int = -1,
    ) -> None:
        pending = self._decision(
            half_offset, half, decoded, transaction_id, commit, from_check, client_id, operator, False, cut
        )
        if pending is not None:
            await pending.durable
            self._finish(pending)

    def _finish(self, pending: _Pending) -> None:
        """The decision's records are durable: reflect them in memory, then raise its answer's error."""
        self._apply(pending.half_offset, pending.event, pending.op_queue_offset)
        if pending.error is not None:
            raise pending.error

    def _decision(
        self,
        half_offset: int,
        half: StoredTuple,
        decoded: dict[str, str],
        transaction_id: str,
        commit: bool | None,
        from_check: bool,
        client_id: str,
        operator: bool,
        shared: bool = False,
        cut: int = -1,
    ) -> _Pending | None:
        """Decide (the caller holds the half's turn) and append what the decision records; None when
        it records nothing. Synchronous: nothing else runs between reading the state and appending.
        ``shared``: the caller only adds done callbacks to the durable awaitable, never awaits it
        (:meth:`end_nowait`'s caller): it may be the write group's one future. ``cut``: the half's
        (:meth:`_take_half`)."""
        decision = Decision.UNKNOWN if commit is None else Decision.COMMIT if commit else Decision.ROLLBACK
        source = (
            DecisionSource.OPERATOR
            if operator
            else DecisionSource.CHECK
            if from_check
            else DecisionSource.PRODUCER
        )
        state = self._state_of(half_offset, half.queue_offset)
        outcome = apply_decision(state, decision, source)
        now = now_ms_of(self._clock)
        kind = EventKind.DECISION
        detail = ""
        error: errors.TxmqError | None = None
        if outcome.kind is OutcomeKind.IGNORED_UNKNOWN:
            if not from_check:
                return None
            kind = EventKind.CHECK_ANSWER
        elif outcome.kind is OutcomeKind.DUPLICATE:
            return None
        elif outcome.kind is OutcomeKind.CONFLICT:
            detail = f"{decision.value} rejected: already {state.value}"
            kind = EventKind.CONFLICT
            error = errors.Conflict(
                f"transaction {transaction_id} was already {state.value.lower()}; {detail}"
            )
        elif outcome.late:
            detail = "late decision on a discarded message"
        client = client_id or None
        # the event built by its slot setters (no interpreted __init__), and its op record body encoded
        # from the same values (no attribute reads on the event): both take the fields in this order
        event = new_event(kind, transaction_id, now, source, client, decision, detail)
        body = encode_event(kind, transaction_id, now, source, client, decision, detail)
        op = self._op_record(half_offset, event, body)
        if error is None and kind is EventKind.DECISION and decision is Decision.COMMIT:
            records = [self._committed_record(half, decoded, now, cut), op]
        else:
            records = [op]
        appended, durable = self._store.put_fields_nowait(records, shared)
        # one C call (_MAKE_PENDING): a NamedTuple's own __new__ is interpreted Python
        pending: _Pending = _MAKE_PENDING(durable, half_offset, event, appended[-1].queue_offset, error)
        return pending

    def _committed_record(
        self, half: StoredTuple, decoded: dict[str, str], now_ms: int, cut: int = -1
    ) -> tuple[str, RecordFields]:
        """The real message; a delayed transactional message is delayed from the commit, not the send."""
        deliver = decoded.get(props.TIMER_DELIVER_MS)
        if (deliver and deliver.isdecimal()) or decoded.get(props.DELAY):
            delayed = self._broker.sender.delayed_from_commit(StoredRecord(*half), decoded, now_ms)
            return self._store.fields_of(delayed)
        # the committed message names its transaction, so consumers (the Spark source's transaction_id)
        # can tell which transaction published it; KEYS and UNIQ_KEY travel unchanged (index_keys: the
        # dispatcher decodes nothing)
        offset = half.physical_offset
        taken = self._taken_id  # transaction_id_of(offset) when the decision took it under that id
        transaction_id = taken[1] if taken[0] == offset else self.transaction_id_of(offset)
        return committed_fields(half, decoded, transaction_id, keys_of(decoded), cut)

    def _state_of(self, half_offset: int, queue_offset: int | None = None) -> TxnState:
        """The state of the half message at ``half_offset`` (``queue_offset``: its half-queue offset,
        when the caller has read the record already)."""
        watch = self._watched.get(half_offset)
        if watch is not None:
            return watch.record.state
        resolved = self._resolved.get(half_offset)
        if resolved is not None:
            return resolved.state
        early = self._early.get(half_offset)
        if early is not None:
            return early.state
        if queue_offset is None:
            queue_offset = self._store.read(half_offset).queue_offset
        if queue_offset >= self._cursor:
            return TxnState.PENDING
        return fold(self._events_of(half_offset)).state  # resolved long ago: ask the op log

    def _events_of(self, half_offset: int) -> list[TxnEvent]:
        found = self._store.query_by_key(op_key(half_offset), 100_000)
        events = [
            TxnEvent.decode(r.body)
            for r in sorted(found, key=lambda r: r.physical_offset)
            if r.topic == names.OP_HALF_TOPIC
        ]
        return events

    def _op_record(
        self, half_offset: int, event: TxnEvent, body: bytes | None = None
    ) -> tuple[str, RecordFields]:
        """The op record of ``event`` as ``(topic, record fields)`` for ``put_fields_nowait`` (no
        :class:`PutRequest`); ``body``: ``event.encode()`` when the caller has it."""
        key = op_key(half_offset)
        # props.encode({KEYS: key, _HALF_PROPERTY: str(o), TAGS: "d"}), written out: digits only
        properties = f"{props.KEYS}{_SEP}{key}{_END}{_HALF_PROPERTY}{_SEP}{half_offset}{_END}{_OP_TAGS}"
        fields: RecordFields = _MAKE_RECORD_FIELDS(
            _OP_TOPIC_BYTES, 0, event.encode() if body is None else body, properties.encode(), 0, 0, 0,
            event.at_ms, b"", 0, 0,
            (key,),  # index_keys: what records.index_keys finds in these properties
        )  # fmt: skip
        return names.OP_HALF_TOPIC, fields

    async def _append_events(self, half_offset: int, events: Sequence[TxnEvent]) -> None:
        appended, durable = self._store.put_fields_nowait([self._op_record(half_offset, e) for e in events])
        await durable
        for event, result in zip(events, appended, strict=True):
            self._apply(half_offset, event, result.queue_offset)

    def _apply(self, half_offset: int, event: TxnEvent, op_queue_offset: int) -> None:
        """Reflect one stored event in memory (also used when replaying the op log at start)."""
        self._op_applied = max(self._op_applied, op_queue_offset + 1)
        watch = self._watched.get(half_offset)
        if watch is None:
            if half_offset in self._resolved:  # e.g. a check sent while the commit was being stored
                self._resolved[half_offset] = step(self._resolved[half_offset], event)
                return
            early = self._early.get(half_offset)
            if early is None:
                early = _NEW
                self._early_starts.append((op_queue_offset, half_offset))
            self._early[half_offset] = step(early, event)
            return
        watch.record = step(watch.record, event)
        if watch.record.state.is_terminal:
            del self._watched[half_offset]
            self._resolved[half_offset] = watch.record
            if len(self._resolved) > _RESOLVED_MAX:
                self._resolved.popitem(last=False)
            self._schedule.set(half_offset, None)
        else:
            self._reschedule(half_offset, watch)

    def _reschedule(self, half_offset: int, watch: Watch) -> None:
        self._schedule.set(half_offset, next_due_ms(self._view(watch, online=True), self.policy))

    def _view(self, watch: Watch, *, online: bool) -> HalfView:
        record = watch.record
        return HalfView(
            stored_ms=record.stored_ms or 0,
            state=record.state,
            checks_delivered=record.checks_delivered,
            last_check_ms=record.last_check_ms,
            immunity_ms=watch.immunity_ms,
            producer_online=online,
        )

    # ---- the check service ---------------------------------------------------------------------
    async def tick(self, now_ms: int) -> int:
        """One round: advance the cursor over half messages past their timeout, then act on what is due."""
        self._advance_cursor(now_ms)
        plan = plan_round(self._schedule.iter_due(now_ms), now_ms, self._round_cursor)
        self._round_cursor = plan.cursor
        acted = 0
        for entry in plan.batch:
            try:
                acted += await self._act(entry.offset, now_ms)
            except errors.StoreFenced:
                raise
            except Exception as exc:  # noqa: BLE001 - a poison record is skipped, never blocks the round
                log.error("transaction check of half message %d failed: %s", entry.offset, exc)
                self._schedule.set(entry.offset, now_ms + self.policy.check_interval_ms)
        if now_ms - self._last_save_ms >= _SAVE_EVERY_MS:
            self.save()
            self._last_save_ms = now_ms
        return acted

    def _advance_cursor(self, now_ms: int) -> None:
        timeout = self.policy.transaction_timeout_ms
        # Peek at one unit first: in most rounds the oldest half past the cursor is not due yet, and
        # reading a full chunk to learn that cost a round ~100x more with many halves pending.
        # Raw units: a chunk read after the peek mostly holds halves not due yet (at 1,000 tx/s a
        # 100 ms round finds ~100 of its 512 due), and a QueueUnit object for each (an interpreted
        # frozen dataclass) cost ~3k instructions, far more than reading the unit (txgap.md).
        chunk = 1
        reread = False
        while True:
            queue_offset, units = self._store.queue_raw_units(names.HALF_TOPIC, 0, self._cursor, chunk)
            due = 0
            for _physical_offset, _size, stored_ms in units:
                if stored_ms + timeout > now_ms:
                    break
                due += 1
            # The units this round acts on (the due halves, and the one that ends the round: its time may
            # be what was damaged) are held to their records first; a unit damaged on disk is rebuilt from
            # the log and the chunk read again (once: a log damaged itself is met by _watch's read).
            acted = units[: due + 1]
            if acted and not reread and not self._store.units_hold(names.HALF_TOPIC, 0, queue_offset, acted):
                reread = True
                continue
            reread = False
            for physical_offset, _size, stored_ms in units[:due]:
                self._watch(physical_offset, queue_offset, stored_ms)
                queue_offset += 1
                self._cursor = queue_offset
            if due < len(units) or len(units) < chunk:
                return
            chunk = _CURSOR_UNITS

    def _watch(self, half_offset: int, queue_offset: int, stored_ms: int) -> None:
        record = self._early.pop(half_offset, _NEW)
        if record.state.is_terminal:
            return
        try:
            half = self._store.read(half_offset)
            decoded = props.decode(half.properties)
        except errors.TxmqError as exc:
            log.error("half message at %d is unreadable and is skipped: %s", half_offset, exc)
            return
        watch = Watch(
            record=dataclasses.replace(record, stored_ms=stored_ms),
            queue_offset=queue_offset,
            immunity_ms=immunity_ms_from_property(decoded.get(props.CHECK_IMMUNITY_TIME_IN_SECONDS)),
            producer_group=decoded.get(props.PRODUCER_GROUP, ""),
            real_topic=decoded.get(props.REAL_TOPIC, ""),
        )
        self._watched[half_offset] = watch
        self._reschedule(half_offset, watch)

    def _producers(self, watch: Watch) -> list[Any]:
        clients = self._broker.clients
        found = clients.producers_for(watch.producer_group) if watch.producer_group else []
        if not found and watch.real_topic:
            found = clients.producers_for(watch.real_topic)
        return found

    async def _act(self, half_offset: int, now_ms: int) -> int:
        watch = self._watched.get(half_offset)
        if watch is None:
            self._schedule.set(half_offset, None)
            return 0
        producers = self._producers(watch)
        action = decide(self._view(watch, online=bool(producers)), now_ms, self.policy)
        if action.kind is ActionKind.WAIT or action.kind is ActionKind.NO_PRODUCER:
            self._schedule.set(half_offset, action.until_ms)
            return 0
        if action.kind is ActionKind.SKIP:
            self._schedule.set(half_offset, None)
            return 0
        txid = self.transaction_id_of(half_offset)
        if action.kind is ActionKind.DISCARD:
            await self._discard(half_offset, txid, now_ms)
            return 1
        view = self._check_view(half_offset, txid)
        for producer in producers:
            if producer.channel is not None and producer.channel.send_check(view, txid):
                event = TxnEvent(
                    kind=EventKind.CHECK_SENT,
                    transaction_id=txid,
                    at_ms=now_ms,
                    producer_client_id=producer.client_id,
                )
                await self._append_events(half_offset, [event])
                self.checks_sent += 1
                return 1
        self._schedule.set(half_offset, now_ms + self.policy.no_producer_retry_ms)
        return 0

    def _check_view(self, half_offset: int, txid: str) -> MessageView:
        half = self._store.read(half_offset)
        decoded = props.decode(half.properties)
        view = to_view(half, decoded=decoded)
        real_queue = decoded.get(props.REAL_QUEUE_ID, "0")
        return dataclasses.replace(
            view,
            topic=decoded.get(props.REAL_TOPIC, view.topic),
            queue_id=int(real_queue) if real_queue.isdecimal() else 0,
            transaction_id=txid,
        )

    async def _discard(self, half_offset: int, txid: str, now_ms: int) -> None:
        half = self._store.read(half_offset)
        decoded = props.decode(half.properties)
        copy = to_real_topic(
            half,
            {**decoded, props.REAL_TOPIC: names.CHECK_MAX_TIME_TOPIC, props.REAL_QUEUE_ID: "0"},
            extra={props.REAL_TOPIC + "_ORIGIN": decoded.get(props.REAL_TOPIC, "")},
        )
        event = TxnEvent(
            kind=EventKind.DISCARDED,
            transaction_id=txid,
            at_ms=now_ms,
            detail=f"no decision after {self.policy.check_max} delivered checks",
        )
        records = [self._store.fields_of(copy), self._op_record(half_offset, event)]
        appended, durable = self._store.put_fields_nowait(records)
        await durable
        self._apply(half_offset, event, appended[-1].queue_offset)
        self.discarded += 1
        log.warning(
            "transaction %s discarded to %s after %d checks",
            txid,
            names.CHECK_MAX_TIME_TOPIC,
            self.policy.check_max,
        )

    # ---- operators -----------------------------------------------------------------------------
    async def resume(self, transaction_id: str) -> None:
        half_offset = self._half_offset(transaction_id)
        half = self._read_half(half_offset)
        if self._state_of(half_offset, half.queue_offset) is not TxnState.DISCARDED:
            raise errors.Conflict(
                f"transaction {transaction_id} is not discarded; only discarded ones resume"
            )
        event = TxnEvent(
            kind=EventKind.RESUMED,
            transaction_id=transaction_id,
            at_ms=self._clock.now_ms(),
            source=DecisionSource.OPERATOR,
        )
        await self._append_events(half_offset, [event])

    async def resolve(self, transaction_id: str, commit: bool) -> None:
        await self.end(
            topic="",
            message_id="",
            transaction_id=transaction_id,
            commit=commit,
            from_check=False,
            operator=True,
        )

    def list_pending(self, limit: int = 1000) -> list[dict[str, Any]]:
        """Pending and discarded half messages, oldest first, with age and delivered checks."""
        now = self._clock.now_ms()
        rows = [self._row(offset, w.record, now) for offset, w in sorted(self._watched.items())]
        units = self._store.checked_units(names.HALF_TOPIC, 0, self._cursor, max(0, limit - len(rows)))
        for unit in units:
            record = self._early.get(unit.physical_offset, TxnRecord(stored_ms=unit.tags_code))
            if not record.state.is_terminal:
                rows.append(
                    self._row(
                        unit.physical_offset, dataclasses.replace(record, stored_ms=unit.tags_code), now
                    )
                )
        return rows[:limit]

    def _row(self, half_offset: int, record: TxnRecord, now_ms: int) -> dict[str, Any]:
        half = self._store.read(half_offset)
        decoded = props.decode(half.properties)
        stored = record.stored_ms or half.born_timestamp_ms
        return {
            "transaction_id": self.transaction_id_of(half_offset),
            "message_id": decoded.get(props.UNIQ_KEY, ""),
            "topic": decoded.get(props.REAL_TOPIC, ""),
            "producer_group": decoded.get(props.PRODUCER_GROUP, ""),
            "state": record.state.value,
            "age_ms": max(0, now_ms - stored),
            "checks": record.checks_delivered,
        }

    def show(self, transaction_id: str) -> dict[str, Any]:
        half_offset = self._half_offset(transaction_id)
        half = self._read_half(half_offset)
        decoded = props.decode(half.properties)
        events = self._events_of(half_offset)
        record = fold(events, TxnRecord(stored_ms=half.born_timestamp_ms))
        return {
            "transaction_id": transaction_id,
            "message_id": decoded.get(props.UNIQ_KEY, ""),
            "topic": decoded.get(props.REAL_TOPIC, ""),
            "producer_group": decoded.get(props.PRODUCER_GROUP, ""),
            "stored_ms": half.born_timestamp_ms,
            "state": self._state_of(half_offset, half.queue_offset).value,
            "checks": record.checks_delivered,
            "history": [{"kind": "HALF_STORED", "at_ms": half.born_timestamp_ms}]
            + [
                {
                    "kind": e.kind.value,
                    "at_ms": e.at_ms,
                    "source": e.source.value if e.source else None,
                    "decision": e.decision.value if e.decision else None,
                    "client": e.producer_client_id,
                    "detail": e.detail,
                }
                for e in events
            ],
        }

    # ---- persistence ---------------------------------------------------------------------------
    def save(self) -> None:
        """Write the snapshot, unless it is the one last written (an idle broker then writes nothing:
        each save is two fsyncs and a rename on the event loop, a stall of every other request)."""
        payload = self.snapshot_json().encode("utf-8")
        if payload == self._saved_payload:
            return
        self._meta.save_encoded(_FILE, payload)
        self._saved_payload = payload

    def snapshot_json(self) -> str:
        """The snapshot document as JSON text: ``{"cursor", "early_from", "op_applied", "watched"}``.

        Early records (decided halves the cursor has not reached, about rate x timeout of them) are not
        in it: a restart rebuilds them from the op records from ``early_from`` on (see :meth:`recover`).
        """
        watched = [
            [o, _record_json(w.record), w.queue_offset, w.immunity_ms, w.producer_group, w.real_topic]
            for o, w in self._watched.items()
        ]
        return (
            f'{{"cursor":{self._cursor},"early_from":{self._early_from()},"op_applied":{self._op_applied},'
            f'"watched":{_dumps(watched)}}}'
        )

    def _early_from(self) -> int:
        """The op queue offset from which the op records rebuild every early record (the offset of the
        op that started the oldest one still early; ``_op_applied`` when there is none)."""
        starts, early = self._early_starts, self._early
        while starts and starts[0][1] not in early:
            starts.popleft()
        return starts[0][0] if starts else self._op_applied

    async def recover(self) -> None:
        """Load the snapshot, then replay the op records: from ``early_from`` those before the offset
        applied rebuild early records only (the watched ones hold them already), the later ones apply to
        everything. A snapshot of an older version holds its early records itself (``early``)."""
        saved = self._meta.load_json(_FILE) or {}
        self._cursor = int(saved.get("cursor", 0))
        applied = self._op_applied = int(saved.get("op_applied", 0))
        for offset, rec, queue_offset, immunity, group, topic in saved.get("watched", []):
            self._watched[int(offset)] = Watch(_record_from(rec), int(queue_offset), immunity, group, topic)
            self._reschedule(int(offset), self._watched[int(offset)])
        for offset, rec in saved.get("early", []):
            self._early[int(offset)] = _record_from(rec)
            self._early_starts.append((applied, int(offset)))
        # halves before this log offset were examined by the cursor: an op about one not watched is
        # about a resolved half, and rebuilds nothing (it would make an early record never taken)
        after_cursor = self._store.checked_units(names.HALF_TOPIC, 0, self._cursor, 1)
        cursor_at = after_cursor[0].physical_offset if after_cursor else None
        low = min(int(saved.get("early_from", applied)), applied)
        low = max(low, self._store.min_offset(names.OP_HALF_TOPIC, 0))
        while True:
            read = self._store.read_queue(names.OP_HALF_TOPIC, 0, low, 512)
            for op in read.records:
                half = props.decode(op.properties).get(_HALF_PROPERTY, "")
                if not half.isdecimal():
                    continue
                offset = int(half)
                if offset in self._watched:
                    if op.queue_offset < applied:
                        continue  # the saved watched record holds it
                elif cursor_at is None or offset < cursor_at:
                    continue
                self._apply(offset, TxnEvent.decode(op.body), op.queue_offset)
            if not read.records:
                break
            low = read.next_offset


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _record_json(record: TxnRecord) -> list[Any]:
    return [
        record.state.value,
        record.stored_ms,
        record.checks_delivered,
        record.last_check_ms,
        record.conflicts,
    ]


def _record_from(data: list[Any]) -> TxnRecord:
    return TxnRecord(
        state=TxnState(data[0]),
        stored_ms=data[1],
        checks_delivered=int(data[2]),
        last_check_ms=data[3],
        conflicts=int(data[4]),
    )


# NamedTuples made per message by one C call each (fastinit.tuple_maker: tuple.__new__'s object without
# the class's interpreted __new__ and without an argument tuple); Final: compiled code reads C statics
_MAKE_STORED_TUPLE: Final = tuple_maker(StoredTuple)
_MAKE_PENDING: Final = tuple_maker(_Pending)
_MAKE_RECORD_FIELDS: Final = tuple_maker(RecordFields)
