"""A single send's result read straight from the answer (``_single.send_result``) is the result the
general reader gives (``_single.send_results``: ``headers.parse_send_response`` + ``SendResult``), and it
raises the same errors; message ids keep the layout and uniqueness of the reference formula."""

from __future__ import annotations

import struct
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client import _single as single
from txmq.common import errors, msgid
from txmq.common.message import Message, MessageQueue, SendResult
from txmq.protocol.remoting.codes import ResponseCode
from txmq.protocol.remoting.command import RemotingCommand

_TARGET = MessageQueue("orders", 3, "broker-a")
_number = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["", "-", "+1", " 1", "1 ", "0x10", "١٢", "1_0", "0" * 19, "9" * 18, "-" + "9" * 18]),
    st.sampled_from(["007", "-0", "-1", "1023", "1024"]),
)
_text = st.text(max_size=40)
_code = st.sampled_from(
    [
        ResponseCode.SUCCESS,
        ResponseCode.FLUSH_DISK_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.TOPIC_NOT_EXIST,
    ]
)


def _outcome(build: object) -> SendResult | tuple[type[BaseException], str]:
    try:
        return build()  # type: ignore[operator,no-any-return]
    except Exception as exc:  # compared between the two readers
        return type(exc), str(exc)


@settings(max_examples=400, deadline=None)
@given(
    code=_code,
    msg_id=st.one_of(st.none(), _text, st.lists(st.text("ABC0,", max_size=8), max_size=3).map(",".join)),
    queue_id=st.one_of(st.none(), _number, st.sampled_from(["3", "4", "0"])),
    offset=st.one_of(st.none(), _number),
    transaction_id=st.one_of(st.none(), _text),
    recall=st.one_of(st.none(), _text),
    batch_uniq=st.one_of(st.none(), _text),
)
def test_send_result_equals_the_general_reader(
    code: int,
    msg_id: str | None,
    queue_id: str | None,
    offset: str | None,
    transaction_id: str | None,
    recall: str | None,
    batch_uniq: str | None,
) -> None:
    ext = {
        key: value
        for key, value in [
            ("msgId", msg_id), ("queueId", queue_id), ("queueOffset", offset),
            ("transactionId", transaction_id), ("recallHandle", recall), ("batchUniqId", batch_uniq),
        ]
        if value is not None
    }  # fmt: skip
    response = RemotingCommand(code=int(code), ext_fields=ext, remark="why")
    fast = _outcome(lambda: single.send_result(_TARGET, "ID1", response))
    general = _outcome(lambda: single.send_results(_TARGET, ["ID1"], response)[0])
    assert fast == general
    if isinstance(fast, SendResult) and fast.queue.queue_id == _TARGET.queue_id:
        assert fast.queue is _TARGET  # the target's queue is reused, as before


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(2, 6),
    msg_id=st.lists(st.text("ABC0", max_size=8), max_size=8).map(",".join),
    queue_id=st.sampled_from(["3", "4"]),
    offset=st.integers(0, 2**40).map(str),
    transaction_id=st.one_of(st.none(), _text),
    recall=st.one_of(st.none(), _text),
)
def test_batch_results_are_the_class_calls(
    count: int, msg_id: str, queue_id: str, offset: str, transaction_id: str | None, recall: str | None
) -> None:
    """A batch's results (slots set one by one, no class call) equal ``SendResult(...)`` called with
    what the answer says: the offset ids in order (None past the last one), positions from the first."""
    ext = {"msgId": msg_id, "queueId": queue_id, "queueOffset": offset}
    if transaction_id is not None:
        ext["transactionId"] = transaction_id
    if recall is not None:
        ext["recallHandle"] = recall
    ids = [f"ID{i}" for i in range(count)]
    results = single.send_results(_TARGET, ids, RemotingCommand(code=0, ext_fields=ext))
    queue = _TARGET if queue_id == "3" else MessageQueue("orders", int(queue_id), "broker-a")
    offset_ids = msg_id.split(",")
    expected = [
        SendResult(
            ids[i],
            queue,
            int(offset) + i,
            transaction_id,
            offset_ids[i] if i < len(offset_ids) else None,
            recall,
        )
        for i in range(count)
    ]
    assert results == expected
    assert all(type(result) is SendResult for result in results)
    assert [repr(result) for result in results] == [repr(result) for result in expected]


def test_send_result_raises_what_the_code_means() -> None:
    response = RemotingCommand(code=int(ResponseCode.SYSTEM_BUSY), remark="busy")
    with pytest.raises(errors.TxmqError) as caught:
        single.send_result(_TARGET, "ID1", response)
    assert caught.value.retriable


def test_request_is_the_transport_request() -> None:
    headers = single.SendHeaders()
    ext_json, body, message_id = headers.request(_TARGET, Message("orders", b"x"), "g", 3)
    assert body == b"x"
    assert f"UNIQ_KEY\\u0001{message_id}" in ext_json


def _reference_id(seq: int, now_ms: int) -> str:
    seconds = max(0, now_ms // 1000 - 1_609_459_200) & 0xFFFFFFFF
    raw = b"\x01" + msgid._HOST_ID + struct.pack(">HII", msgid._PID[0], seconds, seq & 0xFFFFFFFF)
    return raw.hex().upper()


@pytest.mark.parametrize("now_ms", [0, 1_609_459_200_000, 1_700_000_000_123, 1_700_000_001_000, 2**45])
def test_message_id_is_the_reference_layout(now_ms: int) -> None:
    for _ in range(3):  # the prefix formatted once, then reused
        message_id = msgid.new_message_id(now_ms)
        assert message_id == _reference_id(int(message_id[-8:], 16), now_ms)


def test_message_id_follows_a_new_pid() -> None:
    pid = msgid._PID[0]
    try:
        msgid._PID[0] = (pid + 1) & 0xFFFF  # as the fork hook sets it
        message_id = msgid.new_message_id(1_700_000_000_000)
        assert message_id == _reference_id(int(message_id[-8:], 16), 1_700_000_000_000)
    finally:
        msgid._PID[0] = pid
    message_id = msgid.new_message_id(1_700_000_000_000)
    assert message_id[14:18] == f"{pid:04X}"  # 01, 6 bytes of host, then the pid


def test_message_ids_are_unique_across_threads() -> None:
    seen: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(msgid.new_message_id(1_700_000_000_000) for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for out in seen for i in out]
    assert len(set(every)) == len(every) == 20_000


@pytest.mark.parametrize("given", [None, ""])
def test_a_missing_or_empty_message_id_is_made(given: str | None) -> None:
    from txmq.client._remoting import RemotingTransport

    transport = RemotingTransport("127.0.0.1:9876")
    for message in (
        Message("orders", b"x", message_id=given),
        Message("orders", b"x", tags="a", message_id=given),
    ):
        ext_json, _, message_id = transport._single_request(_TARGET, message, "g", 3)
        assert len(message_id) == 34 and message_id in ext_json


def test_a_given_message_id_is_kept() -> None:
    headers = single.SendHeaders()
    _, _, message_id = headers.request(_TARGET, Message("orders", b"x", message_id="MINE"), "g", 3)
    assert message_id == "MINE"
