"""The hand-written parsers of the two hot request headers (SEND_MESSAGE_V2, PULL_MESSAGE) agree with the
generic ``Header.from_ext_fields``: the same header for every input the generic one accepts, the same
error type for every input it rejects. Field values are drawn from numbers in odd spellings (signs,
padding, non-ASCII digits, 19+ digits), booleans in any case, and absent fields. The C reader of the
send header's six fields (``_hdrmap.send_fields``) gives what ``send_header._fast`` gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.protocol.remoting import send_header
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.errors import InvalidHeader
from txmq.protocol.remoting.headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    parse_pull_header,
    parse_send_header,
)
from txmq.protocol.remoting.send_header import SendFields, parse_send_fields

NUMBERS = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.integers(-1, 10**6).map(str),
    st.integers(10**17, 10**25).map(str),
    st.sampled_from(["", "-", "+7", " 7", "7 ", "1_000", "٣", "0x10", "007", "-0", "true", "１２"]),
)
BOOLS = st.sampled_from(["true", "TRUE", "True", "false", "1", "", "yes"])
TEXT = st.text(max_size=12)


def _fields(spec: dict[str, st.SearchStrategy[str]]) -> st.SearchStrategy[dict[str, str]]:
    """Every field drawn, then none, one or two of them dropped (so most inputs reach the parsers)."""

    def drop(fields: dict[str, str], gone: list[str]) -> dict[str, str]:
        return {k: v for k, v in fields.items() if k not in gone}

    return st.builds(drop, st.fixed_dictionaries(spec), st.lists(st.sampled_from(sorted(spec)), max_size=2))


SEND_V2 = _fields(
    {
        "a": TEXT, "b": TEXT, "c": TEXT, "d": NUMBERS, "e": NUMBERS, "f": NUMBERS, "g": NUMBERS,
        "h": NUMBERS, "i": TEXT, "j": NUMBERS, "k": BOOLS, "l": NUMBERS, "m": BOOLS, "n": TEXT,
    }
)  # fmt: skip
SEND_V1 = _fields(
    {
        "producerGroup": TEXT, "topic": TEXT, "defaultTopic": TEXT, "defaultTopicQueueNums": NUMBERS,
        "queueId": NUMBERS, "sysFlag": NUMBERS, "bornTimestamp": NUMBERS, "flag": NUMBERS, "properties": TEXT,
        "reconsumeTimes": NUMBERS, "unitMode": BOOLS, "batch": BOOLS, "maxReconsumeTimes": NUMBERS,
        "brokerName": TEXT,
    }
)  # fmt: skip
PULL = _fields(
    {
        "consumerGroup": TEXT, "topic": TEXT, "queueId": NUMBERS, "queueOffset": NUMBERS,
        "maxMsgNums": NUMBERS, "sysFlag": NUMBERS, "commitOffset": NUMBERS,
        "suspendTimeoutMillis": NUMBERS, "subVersion": NUMBERS, "subscription": TEXT,
        "expressionType": TEXT, "maxMsgBytes": NUMBERS,
    }
)  # fmt: skip


def _outcome(parse: object, *args: object) -> object:
    try:
        return parse(*args)  # type: ignore[operator]
    except InvalidHeader:
        return InvalidHeader


@settings(max_examples=200, deadline=None)
@given(SEND_V2)
def test_send_v2_fast_path_matches_the_generic_parser(ext: dict[str, str]) -> None:
    command = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext)
    assert _outcome(parse_send_header, command) == _outcome(SendMessageRequestHeaderV2.from_ext_fields, ext)


def _six(header: object) -> object:
    """The fields the broker's send path reads, from a full header or from SendFields."""
    if header is InvalidHeader:
        return header
    assert isinstance(header, (SendFields, SendMessageRequestHeader))
    return (
        header.producer_group,
        header.topic,
        header.queue_id,
        header.sys_flag,
        header.properties,
        header.batch,
    )


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE]).flatmap(
        lambda code: st.tuples(st.just(code), SEND_V2)
    )
    | st.tuples(st.just(RequestCode.SEND_MESSAGE), SEND_V1)
)
def test_compiled_send_fields_match_the_generic_parser(case: tuple[RequestCode, dict[str, str]]) -> None:
    """parse_send_fields (the broker's send path) accepts, rejects and reads exactly as parse_send_header."""
    code, ext = case
    command = RemotingCommand(code=code, ext_fields=ext)
    assert _six(_outcome(parse_send_fields, command)) == _six(_outcome(parse_send_header, command))


@settings(max_examples=200, deadline=None)
@given(PULL)
def test_pull_fast_path_matches_the_generic_parser(ext: dict[str, str]) -> None:
    command = RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields=ext)
    assert _outcome(parse_pull_header, command) == _outcome(PullMessageRequestHeader.from_ext_fields, ext)


def test_fast_paths_take_the_common_spellings() -> None:
    """The headers our SDK and 4.x clients send parse (and would fail the test above if wrong)."""
    send = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "1700000000000",
            "h": "0", "i": "TAGS\x01x\x02", "m": "false"}  # fmt: skip
    header = parse_send_header(RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=send))
    assert (header.topic, header.queue_id, header.born_timestamp, header.batch) == (
        "T",
        -1,
        1700000000000,
        False,
    )
    fields = parse_send_fields(RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=send))
    assert (fields.topic, fields.queue_id, fields.properties, fields.batch) == (
        "T",
        -1,
        "TAGS\x01x\x02",
        False,
    )
    pull = {"consumerGroup": "g", "topic": "T", "queueId": "3", "queueOffset": "12", "maxMsgNums": "32",
            "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "1500"}  # fmt: skip
    parsed = parse_pull_header(RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields=pull))
    assert (parsed.queue_id, parsed.queue_offset, parsed.max_msg_bytes) == (3, 12, None)


_V2_OK = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "1700000000000", "h": "0",
          "i": "TAGS\x01x\x02", "j": "0", "k": "false", "l": "16", "m": "true", "n": "b0"}  # fmt: skip
_V1_OK = dict(zip(
    ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
     "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch", "brokerName"],
    _V2_OK.values(), strict=True,
))  # fmt: skip
_ODD = ["", "-", "+7", " 7", "٣", "１２", "0x10", "007", "-0", "true", "TRUE", "1",
        "9" * 18, "9" * 19, "9" * 20, "-" + "9" * 19, "+" + "9" * 19]  # fmt: skip


def _cases() -> list[tuple[int, dict[str, str]]]:
    """Every field of a valid header dropped, and every field set to every odd spelling, for each code."""
    cases: list[tuple[int, dict[str, str]]] = []
    batch = RequestCode.SEND_BATCH_MESSAGE
    bases = [(RequestCode.SEND_MESSAGE, _V1_OK), (RequestCode.SEND_MESSAGE_V2, _V2_OK), (batch, _V2_OK),
             (batch, {**_V2_OK, "m": "x"})]  # fmt: skip
    for code, base in bases:
        cases.append((code, base))
        for name in base:
            cases.append((code, {k: v for k, v in base.items() if k != name}))
            cases.extend((code, {**base, name: odd}) for odd in _ODD)
    return cases


def test_compiled_send_fields_match_the_generic_parser_field_by_field() -> None:
    for code, ext in _cases():
        command = RemotingCommand(code=code, ext_fields=ext)
        assert _six(_outcome(parse_send_fields, command)) == _six(_outcome(parse_send_header, command)), (
            code,
            ext,
        )


_C_FIELDS = send_header._C_FIELDS
_PLAIN_V2 = st.fixed_dictionaries(
    {
        "a": TEXT, "b": TEXT, "c": TEXT, "d": st.integers(-1, 64).map(str), "e": st.integers(-1, 9).map(str),
        "f": st.integers(0, 2**20).map(str), "g": st.integers(0, 2**45).map(str), "h": st.just("0"),
        "j": st.integers(0, 16).map(str), "k": BOOLS, "m": BOOLS, "n": TEXT,
    },
    optional={"i": TEXT, "l": NUMBERS},
)  # fmt: skip


@pytest.mark.skipif(_C_FIELDS is None, reason="the C module is not built (pure Python)")
@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.tuples(st.just(send_header._V2_NAMES), SEND_V2 | _PLAIN_V2),
        st.tuples(st.just(send_header._V1_NAMES), SEND_V1),
    ),
    st.booleans(),
)
def test_c_send_fields_are_what_fast_reads(case: tuple[tuple[str, ...], dict[str, str]], force: bool) -> None:
    """``_hdrmap.send_fields`` gives ``_fast``'s six fields, and declines (None) exactly where ``_fast``
    gives None, but for a non-ASCII batch field (declined, ``_fast`` then reads it)."""
    names, ext = case
    got = _C_FIELDS(ext, names, force)
    expected = send_header._fast(ext, names, force)
    batch_raw = ext.get(names[11])
    if got is None:
        assert expected is None or (not force and batch_raw is not None and not batch_raw.isascii())
        return
    assert expected is not None
    assert got == _six(expected)
    assert type(got[2]) is int and type(got[3]) is int and type(got[5]) is bool


@pytest.mark.skipif(_C_FIELDS is None, reason="the C module is not built (pure Python)")
def test_c_send_fields_leave_odd_types_to_fast() -> None:
    ext = {"a": "g", "b": "t", "c": "c", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0"}
    assert _C_FIELDS(ext, send_header._V2_NAMES, False) == ("g", "t", 0, 0, None, False)
    assert _C_FIELDS({**ext, "e": 0}, send_header._V2_NAMES, False) is None  # not a str
    assert _C_FIELDS({**ext, "a": None}, send_header._V2_NAMES, False) is None
    assert _C_FIELDS({**ext, "i": 1}, send_header._V2_NAMES, False) is None
    assert _C_FIELDS({**ext, "m": "TRUE"}, send_header._V2_NAMES, False)[5] is True
    assert _C_FIELDS(ext, send_header._V2_NAMES[:13], False) is None
    assert _C_FIELDS(list(ext), send_header._V2_NAMES, False) is None
