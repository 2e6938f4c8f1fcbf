# The C extension's interface (src/txmq/client/_batchsend.c); _single.py loads it at run time (None
# when it is not built), and its Python code (results_py, plain_total_py, send_batch's loop) is the
# reference.
import itertools
from collections.abc import Mapping, Sequence

from txmq.common.message import Message, MessageQueue, SendResult

def setup(
    result_cls: type[SendResult],
    result_fields: tuple[str, ...],
    message_cls: type[Message],
    message_fields: tuple[str, ...],
) -> None: ...
def results(
    ids: list[str],
    queue: MessageQueue,
    base: int,
    transaction_id: str | None,
    msg_id: str,
    recall_handle: str | None,
) -> list[SendResult] | None: ...
def plain_total(messages: Sequence[Message], topic: str, body_max: int) -> int: ...
def plain_batch(
    messages: Sequence[Message],
    prefix: str,
    sequence: itertools.count[int],
    id_tail: bytes,
    properties_max: int,
    empty: Mapping[str, str],
) -> tuple[bytes, list[str]] | None: ...
def plain_single(
    message: Message,
    transactional: bool,
    head: bytes,
    now_ms: int,
    before: bytes,
    prefix: str,
    sequence: itertools.count[int],
    after: bytes,
    empty: Mapping[str, str],
) -> tuple[bytes, bytes, str] | None: ...
def transactional_copy(message: Message) -> Message | None: ...
def end_binary(
    group_pair: bytes,
    queue_offset: int,
    log_offset: int,
    decision: bytes,
    msg_id: str,
    topic_pair: bytes,
    check: bytes,
    transaction_id: str,
) -> bytes | None: ...
def offset_id_offset(message_id: str) -> int | None: ...
