"""The send header on the broker's hot path: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and
SEND_BATCH_MESSAGE (320), read into :class:`SendFields` (compiled; ``headers.py`` is not).

The broker's send path reads six fields of the fourteen; this module checks all of them exactly as
:meth:`headers.Header.from_ext_fields` does, field by field, and keeps the six. Whenever a required
field is missing or a number is not a plain decimal it hands the fields to the generic parser, which
decides and words the error, so acceptance, rejection and values are those of
:func:`headers.parse_send_header` (tests/property/test_remoting_fast_headers.py checks it).
"""

from __future__ import annotations

import importlib
from typing import Any, Final, final

from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.headers import SendMessageRequestHeader, parse_send_header

# wire names, in SendMessageRequestHeader's field order: producer_group, topic, default_topic,
# default_topic_queue_nums, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times,
# unit_mode, batch, max_reconsume_times, broker_name
_V1_NAMES: Final = (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
    "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "batch", "maxReconsumeTimes",
    "brokerName",
)  # fmt: skip
_V2_NAMES: Final = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "l", "n")

_SEND_MESSAGE: Final = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH_MESSAGE: Final = int(RequestCode.SEND_BATCH_MESSAGE)

# the small numbers a send header repeats (queue counts and ids, flags): one dict lookup; only
# canonical spellings are keys, anything else goes through _plain_int
_SMALL_INTS: Final[dict[str, int]] = {str(i): i for i in range(-1, 1024)}


@final
class SendFields:
    """What the send path reads from a send header; built once per request (a native class)."""

    producer_group: str
    topic: str
    queue_id: int
    sys_flag: int
    properties: str | None
    batch: bool

    def __init__(
        self,
        producer_group: str,
        topic: str,
        queue_id: int,
        sys_flag: int,
        properties: str | None,
        batch: bool,
    ) -> None:
        self.producer_group = producer_group
        self.topic = topic
        self.queue_id = queue_id
        self.sys_flag = sys_flag
        self.properties = properties
        self.batch = batch


def _number(raw: str) -> bool:
    """Whether ``raw`` is a plain decimal (optional ``-``, ASCII digits, at most 18 of them), which
    ``int()`` and Java's ``parseLong`` read alike. A known small number is one dict lookup."""
    if raw in _SMALL_INTS:
        return True
    digits = raw[1:] if raw[:1] == "-" else raw
    return digits.isdecimal() and digits.isascii() and len(digits) <= 18


def _int(raw: str) -> int:
    value = _SMALL_INTS.get(raw)
    return int(raw) if value is None else value


def _fast(ext: dict[str, str], names: tuple[str, ...], force_batch: bool) -> SendFields | None:
    """The header's six fields when every field is present and plain where it must be, else None."""
    group = ext.get(names[0])
    topic = ext.get(names[1])
    if group is None or topic is None or names[2] not in ext:
        return None
    queues, queue_id, sys_flag = ext.get(names[3]), ext.get(names[4]), ext.get(names[5])
    born, flag = ext.get(names[6]), ext.get(names[7])
    if queues is None or queue_id is None or sys_flag is None or born is None or flag is None:
        return None
    if not (_number(queues) and _number(queue_id) and _number(sys_flag) and _number(born) and _number(flag)):
        return None
    reconsume, max_reconsume = ext.get(names[9]), ext.get(names[12])
    if (reconsume is not None and not _number(reconsume)) or (
        max_reconsume is not None and not _number(max_reconsume)
    ):
        return None
    batch = force_batch
    if not batch:
        raw = ext.get(names[11])
        batch = raw is not None and raw.lower() == "true"
    return SendFields(group, topic, _int(queue_id), _int(sys_flag), ext.get(names[8]), batch)


def _from_header(header: SendMessageRequestHeader) -> SendFields:
    return SendFields(
        header.producer_group, header.topic, header.queue_id, header.sys_flag, header.properties, header.batch
    )


def _load_send_fields() -> Any:
    """The C reader of :func:`_fast`'s six fields (``_hdrmap.send_fields``) or None (not built, or
    ``TXMQ_PURE=1``): then :func:`_fast`, the reference, reads every header."""
    try:
        return importlib.import_module("txmq.protocol.remoting._hdrmap").send_fields
    except (ImportError, AttributeError):
        return None


_C_FIELDS: Final[Any] = _load_send_fields()


def _c_fast(ext: dict[str, str], names: tuple[str, ...], force_batch: bool) -> SendFields | None:
    """:func:`_fast` by one C call, or None where the C call declines (then :func:`_fast` decides);
    where it answers, it answers what :func:`_fast` does (tests/property/test_remoting_fast_headers.py)."""
    got: tuple[str, str, int, int, str | None, bool] | None = _C_FIELDS(ext, names, force_batch)
    if got is None:
        return None
    return SendFields(got[0], got[1], got[2], got[3], got[4], got[5])


def parse_send_fields(cmd: RemotingCommand) -> SendFields:
    """The send header of a 10/310/320 request (``batch`` is true for code 320 whatever the field
    says); raises ``InvalidHeader`` exactly when :func:`headers.parse_send_header` does."""
    code = cmd.code
    names = _V1_NAMES if code == _SEND_MESSAGE else _V2_NAMES
    force_batch = code == _SEND_BATCH_MESSAGE
    fields = None if _C_FIELDS is None else _c_fast(cmd.ext_fields, names, force_batch)
    if fields is None:
        fields = _fast(cmd.ext_fields, names, force_batch)
    return _from_header(parse_send_header(cmd)) if fields is None else fields
