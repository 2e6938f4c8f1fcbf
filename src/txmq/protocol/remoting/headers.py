"""Typed custom headers: the ``extFields`` each request and response carries, as slotted dataclasses.

Every header class maps its snake_case attributes to RocketMQ's camelCase field names (overridable
per class with ``WIRE_NAMES``, e.g. SEND_MESSAGE_V2's one-letter names). ``to_ext_fields()`` renders
the Java string forms (``"true"``/``"false"``, decimal integers) and leaves out ``None``;
``from_ext_fields()`` ignores fields it does not know, and raises ``InvalidHeader`` when a required
field (an attribute without a default, like Java's ``@CFNotNull``) is missing or a number is not one.
Booleans parse like Java's ``Boolean.parseBoolean``: only ``"true"`` (any case) is true.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.errors import InvalidHeader

_MISSING: Final = dataclasses.MISSING


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    wire: str
    kind: type  # int, str or bool
    required: bool


_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _specs(cls: type[Header]) -> tuple[_Spec, ...]:
    """The field table of a header class, built once from its dataclass fields and annotations."""
    cached = _SPECS.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    specs = []
    for fld in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = next(t for t in (bool, int, str) if t in (*typing.get_args(hints[fld.name]), hints[fld.name]))
        required = fld.default is _MISSING and fld.default_factory is _MISSING
        specs.append(_Spec(fld.name, cls.WIRE_NAMES.get(fld.name, _camel(fld.name)), kind, required))
    _SPECS[cls] = result = tuple(specs)
    return result


def _parse_int(cls: type, wire: str, raw: str) -> int:
    """Java ``Long.parseLong`` rules: optional sign, ASCII digits only, at most 19 of them."""
    digits = raw[1:] if raw[:1] in "+-" else raw
    if not (digits.isascii() and digits.isdecimal() and len(digits) <= 19):
        raise InvalidHeader(f"{cls.__name__}: field {wire!r} is not an integer: {raw[:64]!r}")
    return int(raw)


class Header:
    """Base of all custom headers.

    Subclasses are slotted dataclasses, not frozen ones: a frozen 14-field dataclass costs about
    twice as much to build, and the send header is built once per message. Treat them as values.
    """

    __slots__ = ()
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {}

    def to_ext_fields(self) -> dict[str, str]:
        ext: dict[str, str] = {}
        for spec in _specs(type(self)):
            value = getattr(self, spec.attr)
            if value is None:
                continue
            if spec.kind is bool:
                ext[spec.wire] = "true" if value else "false"
            elif spec.kind is int:
                ext[spec.wire] = str(int(value))
            else:
                ext[spec.wire] = value
        return ext

    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, str]) -> Self:
        values: dict[str, Any] = {}
        for spec in _specs(cls):
            raw = ext.get(spec.wire)
            if raw is None:
                if spec.required:
                    raise InvalidHeader(f"{cls.__name__}: required field {spec.wire!r} is missing")
            elif spec.kind is str:
                values[spec.attr] = raw
            elif spec.kind is int:
                values[spec.attr] = _parse_int(cls, spec.wire, raw)
            else:
                values[spec.attr] = raw.lower() == "true"
        return cls(**values)

    @classmethod
    def from_command(cls, cmd: RemotingCommand) -> Self:
        return cls.from_ext_fields(cmd.ext_fields)


# ---------------------------------------------------------------------------------------------- producer


@dataclass(slots=True)
class SendMessageRequestHeader(Header):
    """SEND_MESSAGE (10) with long names; the C++ client marks batches with ``batch=true``."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: int | None = None
    broker_name: str | None = None


@dataclass(slots=True)
class SendMessageRequestHeaderV2(SendMessageRequestHeader):
    """SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): the same fields under one-letter names."""

    WIRE_NAMES: ClassVar[Mapping[str, str]] = {
        "producer_group": "a",
        "topic": "b",
        "default_topic": "c",
        "default_topic_queue_nums": "d",
        "queue_id": "e",
        "sys_flag": "f",
        "born_timestamp": "g",
        "flag": "h",
        "properties": "i",
        "reconsume_times": "j",
        "unit_mode": "k",
        "max_reconsume_times": "l",
        "batch": "m",
        "broker_name": "n",
    }


def _plain_int(raw: str) -> int | None:
    """``raw`` as an int when it is a plain decimal (ASCII digits, optional ``-``, at most 18 digits),
    which ``int()`` and Java's ``parseLong`` read alike; None sends the caller to the generic parser."""
    digits = raw[1:] if raw[:1] == "-" else raw
    if digits.isdecimal() and digits.isascii() and len(digits) <= 18:
        return int(raw)
    return None


# the small numbers a send header repeats (queue counts and ids, flags): one dict lookup instead of the
# plain-decimal check; only canonical spellings are keys, so anything else still goes to _plain_int
_SMALL_INTS: Final[dict[str, int]] = {str(i): i for i in range(-1, 1024)}


def _optional_int(raw: str | None) -> int | bool | None:
    """None for an absent field, the int for a plain one, False for one the generic parser must judge."""
    if raw is None:
        return None
    value = _SMALL_INTS.get(raw)
    if value is None:
        value = _plain_int(raw)
    return False if value is None else value


def _send_v2_fast(ext: Mapping[str, str]) -> SendMessageRequestHeaderV2 | None:
    """SEND_MESSAGE_V2's header read field by field: the generic table walk cost ~6 us per message.

    Returns None whenever a required field is missing or a number is not plain, so that the generic
    :meth:`Header.from_ext_fields` decides (and words the error); the result is otherwise identical
    (tests/property/test_remoting_fast_headers.py checks it)."""
    get = ext.get
    a, b, c, d, e, f, g, h = get("a"), get("b"), get("c"), get("d"), get("e"), get("f"), get("g"), get("h")
    if a is None or b is None or c is None or d is None or e is None or f is None or g is None or h is None:
        return None
    small = _SMALL_INTS.get
    queues, queue_id, sys_flag, born, flag = small(d), small(e), small(f), _plain_int(g), small(h)
    if queues is None:
        queues = _plain_int(d)
    if queue_id is None:
        queue_id = _plain_int(e)
    if sys_flag is None:
        sys_flag = _plain_int(f)
    if flag is None:
        flag = _plain_int(h)
    if queues is None or queue_id is None or sys_flag is None or born is None or flag is None:
        return None
    reconsume, max_reconsume = _optional_int(get("j")), _optional_int(get("l"))
    if reconsume is False or max_reconsume is False:
        return None
    k, m = get("k"), get("m")
    # positional, in field order (the cheaper call): producer_group, topic, default_topic,
    # default_topic_queue_nums, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times,
    # unit_mode, batch, max_reconsume_times, broker_name
    return SendMessageRequestHeaderV2(
        a, b, c, queues, queue_id, sys_flag, born, flag, get("i"), reconsume,
        k is not None and k.lower() == "true", m is not None and m.lower() == "true", max_reconsume, get("n"),
    )  # fmt: skip


def send_v2_fields(
    producer_group: str,
    topic: str,
    default_topic: str,
    default_topic_queue_nums: int,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    properties: str | None,
    batch: bool,
    broker_name: str | None,
) -> dict[str, str]:
    """``SendMessageRequestHeaderV2(..., flag=0, reconsume_times=0).to_ext_fields()`` written out, in
    the same order (the SDK sends one per message; tests/unit/test_remoting_headers.py checks they
    agree)."""
    ext = {
        "a": producer_group, "b": topic, "c": default_topic, "d": str(default_topic_queue_nums),
        "e": str(queue_id), "f": str(sys_flag), "g": str(born_timestamp), "h": "0",
    }  # fmt: skip
    if properties is not None:
        ext["i"] = properties
    ext["j"] = "0"
    ext["k"] = "false"
    ext["m"] = "true" if batch else "false"
    if broker_name is not None:
        ext["n"] = broker_name
    return ext


def parse_send_header(cmd: RemotingCommand) -> SendMessageRequestHeader:
    """The send header of a 10/310/320 request; ``batch`` is true for code 320 whatever the field says."""
    if cmd.code == RequestCode.SEND_MESSAGE:
        return SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    header = _send_v2_fast(cmd.ext_fields) or SendMessageRequestHeaderV2.from_ext_fields(cmd.ext_fields)
    if cmd.code == RequestCode.SEND_BATCH_MESSAGE and not header.batch:
        header = dataclasses.replace(header, batch=True)
    return header


@dataclass(slots=True)
class SendMessageResponseHeader(Header):
    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None


def parse_send_response(ext: Mapping[str, str]) -> SendMessageResponseHeader:
    """``SendMessageResponseHeader.from_ext_fields(ext)``, read field by field when the numbers are
    plain (the SDK reads one per send); anything else goes the generic way, which words the errors."""
    msg_id, queue_id, offset = ext.get("msgId"), ext.get("queueId"), ext.get("queueOffset")
    if msg_id is not None and queue_id is not None and offset is not None:
        queue, position = _plain_int(queue_id), _plain_int(offset)
        if queue is not None and position is not None:
            return SendMessageResponseHeader(
                msg_id,
                queue,
                position,
                ext.get("transactionId"),
                ext.get("batchUniqId"),
                ext.get("recallHandle"),
            )
    return SendMessageResponseHeader.from_ext_fields(ext)


def send_response_fields(
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    transaction_id: str | None = None,
    batch_uniq_id: str | None = None,
    recall_handle: str | None = None,
) -> dict[str, str]:
    """``SendMessageResponseHeader(...).to_ext_fields()`` written out (the send path answers with it
    once per request; tests/unit/test_remoting_headers.py checks they agree)."""
    ext = {"msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(queue_offset)}
    if transaction_id is not None:
        ext["transactionId"] = transaction_id
    if batch_uniq_id is not None:
        ext["batchUniqId"] = batch_uniq_id
    if recall_handle is not None:
        ext["recallHandle"] = recall_handle
    return ext


@dataclass(slots=True)
class EndTransactionRequestHeader(Header):
    """END_TRANSACTION (37); ``commit_or_rollback`` is 0 unknown, 8 commit, 12 rollback."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    topic: str | None = None
    from_transaction_check: bool = False
    transaction_id: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(Header):
    """CHECK_TRANSACTION_STATE (39), broker -> producer, oneway; body = the encoded half message."""

    tran_state_table_offset: int
    commit_log_offset: int
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# ---------------------------------------------------------------------------------------------- consumer


@dataclass(slots=True)
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11); ``sys_flag`` bits are codes.PULL_*; long-polls ``suspend_timeout_millis``."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int = 0
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None


def parse_pull_header(cmd: RemotingCommand) -> PullMessageRequestHeader:
    """PULL_MESSAGE's header, read field by field (the hot consumer request), else generically: the
    same value as :meth:`Header.from_ext_fields`, which words the errors."""
    ext = cmd.ext_fields
    get = ext.get
    group, topic = get("consumerGroup"), get("topic")
    raw = (get("queueId"), get("queueOffset"), get("maxMsgNums"), get("sysFlag"), get("commitOffset"),
           get("suspendTimeoutMillis"))  # fmt: skip
    if group is not None and topic is not None and None not in raw:
        queue_id, offset, count, sys_flag, commit, suspend = (_plain_int(r) for r in raw)  # type: ignore[arg-type]
        sub_version, max_bytes = _optional_int(get("subVersion")), _optional_int(get("maxMsgBytes"))
        if (
            queue_id is not None and offset is not None and count is not None and sys_flag is not None
            and commit is not None and suspend is not None and sub_version is not False
            and max_bytes is not False
        ):  # fmt: skip
            return PullMessageRequestHeader(
                consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                max_msg_nums=count, sys_flag=sys_flag, commit_offset=commit, suspend_timeout_millis=suspend,
                sub_version=0 if sub_version is None else sub_version, subscription=get("subscription"),
                expression_type=get("expressionType"), max_msg_bytes=max_bytes,
            )  # fmt: skip
    return PullMessageRequestHeader.from_ext_fields(ext)


@dataclass(slots=True)
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@dataclass(slots=True)
class QueryConsumerOffsetResponseHeader(Header):
    offset: int


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(slots=True)
class GetMaxOffsetRequestHeader(Header):
    topic: str
    queue_id: int
    committed: bool | None = None


@dataclass(slots=True)
class GetMaxOffsetResponseHeader(Header):
    offset: int


@dataclass(slots=True)
class GetMinOffsetRequestHeader(Header):
    topic: str
    queue_id: int


@dataclass(slots=True)
class GetMinOffsetResponseHeader(Header):
    offset: int


@dataclass(slots=True)
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29)."""

    topic: str
    queue_id: int
    timestamp: int
    boundary_type: str | None = None


@dataclass(slots=True)
class SearchOffsetResponseHeader(Header):
    offset: int


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(Header):
    """CONSUMER_SEND_MSG_BACK (36): ``offset`` is the commit-log offset of the failed message."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None


@dataclass(slots=True)
class GetConsumerListByGroupRequestHeader(Header):
    consumer_group: str


@dataclass(slots=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str


@dataclass(slots=True)
class UnregisterClientRequestHeader(Header):
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {"client_id": "clientID"}

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None


# ---------------------------------------------------------------------------------------------- name server


@dataclass(slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(slots=True)
class RegisterBrokerRequestHeader(Header):
    """REGISTER_BROKER (103); body = RegisterBrokerBody JSON (zlib-compressed when ``compressed``)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    heartbeat_timeout_millis: int | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    body_crc32: int = 0


@dataclass(slots=True)
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class UnregisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class GetKVConfigRequestHeader(Header):
    namespace: str
    key: str


@dataclass(slots=True)
class GetKVConfigResponseHeader(Header):
    value: str | None = None


# ---------------------------------------------------------------------------------------------- admin


@dataclass(slots=True)
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int | None = None
    order: bool = False
    attributes: str | None = None


@dataclass(slots=True)
class DeleteTopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER (215) and DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str


@dataclass(slots=True)
class QueryMessageRequestHeader(Header):
    """QUERY_MESSAGE (12): messages by key; the body of the answer is encoded message records."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclass(slots=True)
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass(slots=True)
class ViewMessageRequestHeader(Header):
    """VIEW_MESSAGE_BY_ID (33): ``offset`` is the commit-log offset decoded from an offset message id."""

    offset: int
    topic: str | None = None
