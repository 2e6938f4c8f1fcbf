"""Typed headers: wire names, Java string forms, leniency on extras, strictness on required/numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txmq.protocol.remoting import headers as h
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.command import make_request
from txmq.protocol.remoting.errors import InvalidHeader

ALI_ONS_V2 = {  # ali-ons' SEND_MESSAGE_V2 extFields after the frame decoder coerced them (protocol.md §5)
    "a": "PID_ONS", "b": "TopicOns", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1795345299392",
    "h": "0", "i": "TAGS\x01TagA\x02KEYS\x01k1\x02", "j": "0", "k": "false",
}  # fmt: skip


def test_send_v2_from_ali_ons() -> None:
    header = h.parse_send_header(make_request(RequestCode.SEND_MESSAGE_V2, 1, ALI_ONS_V2))
    assert header == h.SendMessageRequestHeaderV2(
        producer_group="PID_ONS", topic="TopicOns", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=1795345299392, flag=0,
        properties="TAGS\x01TagA\x02KEYS\x01k1\x02", reconsume_times=0, unit_mode=False,
    )  # fmt: skip
    assert not header.batch


def test_send_v1_long_names_with_cpp_batch_flag() -> None:
    v1 = h.SendMessageRequestHeader("G", "T", "TBW102", 4, 1, 0, 5, 0, batch=True)
    ext = v1.to_ext_fields()
    assert ext["producerGroup"] == "G"
    assert ext["batch"] == "true"
    assert "properties" not in ext
    assert h.parse_send_header(make_request(RequestCode.SEND_MESSAGE, 1, ext)) == v1


def test_batch_code_implies_batch() -> None:
    header = h.parse_send_header(make_request(RequestCode.SEND_BATCH_MESSAGE, 1, ALI_ONS_V2))
    assert header.batch


def test_v2_round_trip_uses_short_names() -> None:
    v2 = h.SendMessageRequestHeaderV2("G", "T", "TBW102", 4, 1, 0, 5, 0, "p", 2, True, True, 16, "b0")
    ext = v2.to_ext_fields()
    assert set(ext) == set("abcdefghijklmn")
    assert h.SendMessageRequestHeaderV2.from_ext_fields(ext) == v2


def test_extra_fields_ignored_missing_required_rejected() -> None:
    ext = {"consumerGroup": "g", "topic": "t", "queueId": "1", "commitOffset": "9", "bname": "x"}
    assert h.UpdateConsumerOffsetRequestHeader.from_ext_fields(ext).commit_offset == 9
    del ext["queueId"]
    with pytest.raises(InvalidHeader, match="queueId"):
        h.UpdateConsumerOffsetRequestHeader.from_ext_fields(ext)


@pytest.mark.parametrize("bad", ["", "1.5", "ten", "0x10", " 1", "1" * 25])
def test_non_numeric_numbers_rejected(bad: str) -> None:
    with pytest.raises(InvalidHeader, match="offset"):
        h.QueryConsumerOffsetResponseHeader.from_ext_fields({"offset": bad})


def test_booleans_parse_like_java() -> None:
    base = {
        "producerGroup": "g",
        "tranStateTableOffset": "1",
        "commitLogOffset": "2",
        "commitOrRollback": "8",
    }
    for raw, expected in [("true", True), ("TRUE", True), ("false", False), ("yes", False)]:
        ext = {**base, "msgId": "m", "fromTransactionCheck": raw}
        assert h.EndTransactionRequestHeader.from_ext_fields(ext).from_transaction_check is expected


def test_unregister_client_uses_client_id_spelling() -> None:
    header = h.UnregisterClientRequestHeader("cid", producer_group="pg")
    assert header.to_ext_fields() == {"clientID": "cid", "producerGroup": "pg"}


HEADERS: list[h.Header] = [
    h.SendMessageResponseHeader("0A00000100002A9F0000000000000000", 1, 7, transaction_id="T"),
    h.PullMessageRequestHeader("g", "t", 0, 5, 32, 0x2 | 0x4, 0, 15000, 1, "*", "TAG", 1 << 20),
    h.PullMessageResponseHeader(0, 6, 0, 10),
    h.EndTransactionRequestHeader("pg", 1, 2, 8, "m", "t", True, "tx"),
    h.CheckTransactionStateRequestHeader(1, 2, "t", "m", "tx", "off"),
    h.QueryConsumerOffsetRequestHeader("g", "t", 3, True),
    h.QueryConsumerOffsetResponseHeader(-1),
    h.GetMaxOffsetRequestHeader("t", 0),
    h.GetMaxOffsetResponseHeader(1 << 40),
    h.GetMinOffsetRequestHeader("t", 1),
    h.GetMinOffsetResponseHeader(0),
    h.SearchOffsetRequestHeader("t", 1, 1_700_000_000_000),
    h.SearchOffsetResponseHeader(3),
    h.ConsumerSendMsgBackRequestHeader(99, "g", 0, "om", "ot", False, 16),
    h.GetConsumerListByGroupRequestHeader("g"),
    h.NotifyConsumerIdsChangedRequestHeader("g"),
    h.GetRouteInfoRequestHeader("t"),
    h.RegisterBrokerRequestHeader("b", "1.2.3.4:10911", "c", "1.2.3.4:10912", 0, 30000),
    h.RegisterBrokerResponseHeader("ha", "m"),
    h.UnregisterBrokerRequestHeader("b", "a", "c", 0),
    h.GetKVConfigRequestHeader("ORDER_TOPIC_CONFIG", "t"),
    h.GetKVConfigResponseHeader(None),
    h.CreateTopicRequestHeader("t", "TBW102", 8, 8, 6),
    h.DeleteTopicRequestHeader("t"),
    h.QueryMessageRequestHeader("t", "k", 32, 0, 1 << 41),
    h.QueryMessageResponseHeader(5, 6),
    h.ViewMessageRequestHeader(1234),
]


@pytest.mark.parametrize("header", HEADERS, ids=[type(x).__name__ for x in HEADERS])
def test_round_trip(header: h.Header) -> None:
    ext = header.to_ext_fields()
    assert all(type(v) is str for v in ext.values())
    assert type(header).from_ext_fields(ext) == header


def test_wire_names_are_java_names() -> None:
    pull = h.PullMessageRequestHeader("g", "t", 0, 5, 32, 2, 0, 15000).to_ext_fields()
    assert set(pull) == {
        "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
        "suspendTimeoutMillis", "subVersion",
    }  # fmt: skip
    assert "indexLastUpdatePhyoffset" in h.QueryMessageResponseHeader(1, 2).to_ext_fields()
    assert "bodyCrc32" in h.RegisterBrokerRequestHeader("b", "a", "c", "h", 0).to_ext_fields()


@given(
    msg_id=st.text(max_size=40),
    queue_id=st.integers(-(2**31), 2**31 - 1),
    queue_offset=st.integers(-(2**63), 2**63 - 1),
    transaction_id=st.none() | st.text(max_size=10),
    batch_uniq_id=st.none() | st.text(max_size=10),
    recall_handle=st.none() | st.text(max_size=10),
)
def test_send_response_fields_match_the_header_class(
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    transaction_id: str | None,
    batch_uniq_id: str | None,
    recall_handle: str | None,
) -> None:
    header = h.SendMessageResponseHeader(
        msg_id, queue_id, queue_offset, transaction_id, batch_uniq_id, recall_handle
    )
    fields = h.send_response_fields(
        msg_id, queue_id, queue_offset, transaction_id, batch_uniq_id, recall_handle
    )
    assert list(fields.items()) == list(header.to_ext_fields().items())


@given(
    producer_group=st.text(max_size=10),
    topic=st.text(max_size=10),
    queues=st.integers(0, 1 << 20),
    queue_id=st.integers(-1, 1 << 20),
    sys_flag=st.integers(0, 1 << 16),
    born=st.integers(0, 1 << 62),
    properties=st.none() | st.text(max_size=20),
    batch=st.booleans(),
    broker_name=st.none() | st.text(max_size=10),
)
def test_send_v2_fields_match_the_header_class(
    producer_group: str,
    topic: str,
    queues: int,
    queue_id: int,
    sys_flag: int,
    born: int,
    properties: str | None,
    batch: bool,
    broker_name: str | None,
) -> None:
    header = h.SendMessageRequestHeaderV2(
        producer_group=producer_group, topic=topic, default_topic="TBW102", default_topic_queue_nums=queues,
        queue_id=queue_id, sys_flag=sys_flag, born_timestamp=born, flag=0, properties=properties,
        reconsume_times=0, batch=batch, broker_name=broker_name,
    )  # fmt: skip
    fields = h.send_v2_fields(
        producer_group, topic, "TBW102", queues, queue_id, sys_flag, born, properties, batch, broker_name
    )
    assert list(fields.items()) == list(header.to_ext_fields().items())


_NUMBERISH = st.sampled_from(["0", "7", "-3", "+5", "1_000", " 1", "１", "", "x", "9" * 19, "9" * 20])


@given(
    fields=st.dictionaries(
        st.sampled_from(["msgId", "queueId", "queueOffset", "transactionId", "batchUniqId", "recallHandle"]),
        _NUMBERISH | st.text(max_size=8) | st.integers(-(1 << 40), 1 << 40).map(str),
    )
)
def test_parse_send_response_matches_the_generic_parse(fields: dict[str, str]) -> None:
    try:
        expected: object = h.SendMessageResponseHeader.from_ext_fields(fields)
    except InvalidHeader as exc:
        expected = str(exc)
    try:
        got: object = h.parse_send_response(fields)
    except InvalidHeader as exc:
        got = str(exc)
    assert got == expected
