"""The SDK's batch body is byte for byte the general encode's, and fails with the same error.

``_remoting_convert.batch_body`` formats a plain message's properties directly; the reference builds
``message_properties`` per message and ``encode_batch``. Messages with awkward values (separators,
lone surrogates, over-long values, empty strings) must give the same bytes or the same error.
"""

from __future__ import annotations

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from txmq.client._remoting_convert import (
    _plain_batch_body,
    batch_body,
    batch_body_general,
    message_properties,
    plain_id_tail,
)
from txmq.common import errors
from txmq.common.message import Message
from txmq.protocol.remoting.message_codec import BatchMessage, decode_batch, encode_batch

_TEXT = st.sampled_from(["", "t", "tag-1", "é", "a b", "x" * 40_000, "\ud800"]) | st.text(
    alphabet=st.sampled_from("ab \x01\x02é"), max_size=5
)
_OPTIONAL = st.none() | _TEXT


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["plain", "plain", "plain", "user", "delay", "timer", "tx"]))
    return Message(
        topic="T",
        body=draw(st.sampled_from([b"x", b"body" * 64, bytearray(b"ba")])),
        tags=draw(_OPTIONAL),
        keys=tuple(draw(st.lists(_TEXT, max_size=3))),
        properties=draw(st.dictionaries(st.sampled_from(["a", "TAGS", "PGROUP", "u"]), _TEXT, max_size=2))
        if kind == "user"
        else {},
        message_group=draw(_OPTIONAL),
        delay_level=2 if kind == "delay" else None,
        delivery_timestamp_ms=1_800_000_000_000 if kind == "timer" else None,
        message_id=draw(st.none() | st.sampled_from(["ID-1", "", "0123456789ABCDEF"])),
        transactional=kind == "tx",
        check_immunity_s=draw(st.none() | st.just(5)),
    )


def _outcome(call: object) -> tuple[str, bytes | str]:
    assert callable(call)
    try:
        return "ok", call()
    except errors.TxmqError as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=1000, deadline=None)
@given(
    batch=st.lists(messages(), min_size=1, max_size=4),
    producer_group=st.sampled_from(["", "pg", "p\x01g", "é"]),
    data=st.data(),
)
@example(batch=[Message("T", b"x", tags="a\x02b")], producer_group="pg", data=None)
@example(batch=[Message("T", b"x", keys=("k\x01",))], producer_group="", data=None)
@example(batch=[Message("T", b"x", message_group="")], producer_group="pg", data=None)
# plain messages with no tags, keys or group take the shortest lines: ids and groups that must leave them
@example(batch=[Message("T", b"x", message_id="a\x01b")], producer_group="pg", data=None)
@example(batch=[Message("T", b"x", message_id="a\x02b")], producer_group="", data=None)
@example(batch=[Message("T", b"x", message_id="\u00e9")], producer_group="pg", data=None)
@example(batch=[Message("T", b"x", message_id="\ud800")], producer_group="pg", data=None)
@example(batch=[Message("T", b"x", message_id="I" * 40_000)], producer_group="pg", data=None)
@example(batch=[Message("T", b"x"), Message("T", b"y", tags="")], producer_group="p\x02g", data=None)
@example(batch=[Message("T", b"x", tags="", keys=())], producer_group="\ud800", data=None)
def test_batch_body_is_the_general_encode(
    batch: list[Message], producer_group: str, data: st.DataObject | None
) -> None:
    ids = [m.message_id or f"ID{i:032X}" for i, m in enumerate(batch)]
    if data is not None and data.draw(st.booleans()):
        ids[0] = data.draw(_TEXT)  # a message id as awkward as any other value

    def reference() -> bytes:
        entries = [
            BatchMessage(bytes(m.body), message_properties(m, i, producer_group))
            for m, i in zip(batch, ids, strict=True)
        ]
        return encode_batch(entries)

    expected = _outcome(reference)
    assert _outcome(lambda: batch_body(batch, ids, producer_group)) == expected
    if expected[0] == "ok":
        assert isinstance(expected[1], bytes)
        assert len(decode_batch(expected[1])) == len(batch)


_PLAINISH = st.builds(
    Message,
    topic=st.just("T"),
    body=st.sampled_from([b"", b"x", b"body" * 300] * 6 + [bytearray(b"ba")]),
    tags=st.sampled_from([None] * 20 + ["", "t"]),
    keys=st.sampled_from([()] * 20 + [("k",)]),
    message_group=st.sampled_from([None] * 20 + [""]),
    message_id=st.sampled_from([None] * 20 + ["ID-1", "", "a\x01b", "a\x02b", "é"]),
)


@settings(max_examples=1000, deadline=None)
@given(
    batch=st.lists(_PLAINISH, min_size=1, max_size=6),
    producer_group=st.sampled_from(["", "pg", "bench-p0", "é"] * 3 + ["p\x01g", "p\x02g", "\ud800"]),
    id_length=st.sampled_from([1, 32, 32, 32, 40_000]),
)
@example(batch=[Message("T", b"x")] * 3, producer_group="pg", id_length=32)
@example(batch=[Message("T", b"x")] * 2, producer_group="pg", id_length=40_000)
def test_the_plain_batch_pass_is_the_general_one(
    batch: list[Message], producer_group: str, id_length: int
) -> None:
    """The one-pass layout of a batch of plain messages (``_plain_batch_body``) gives the bytes of
    ``batch_body_general`` (which the test above holds to the reference); batches it declines (a
    tag, keys, a group, a bytearray body, an odd id or group, an entry too long) give the general
    way's bytes or error too. Mostly plain batches, so the one pass runs and also stops part way."""
    ids = [m.message_id if m.message_id is not None else f"{i:0{id_length}X}" for i, m in enumerate(batch)]
    fast = _outcome(lambda: batch_body(batch, ids, producer_group))
    assert fast == _outcome(lambda: batch_body_general(batch, ids, producer_group))
    tail = plain_id_tail(producer_group)
    taken = tail is not None and _plain_batch_body(batch, ids, tail) is not None
    event("one pass" if taken else "declined")
    if taken:
        assert fast[0] == "ok"
