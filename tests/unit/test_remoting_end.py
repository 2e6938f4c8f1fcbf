"""END_TRANSACTION's pre-rendered header (``_remoting._end_json`` + ``send_json_oneway``, and
``_end_binary`` + ``send_binary_oneway``) gives the very frame the generic encoder gives for
``_end_fields`` (a header dataclass and its field table)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.client._remoting import _end_binary, _end_binary_pairs, _end_fields, _end_json
from txmq.client._transport import TransactionRef
from txmq.common import msgid
from txmq.protocol.remoting import frame
from txmq.protocol.remoting.codes import RPC_ONEWAY, RequestCode, SerializeType
from txmq.protocol.remoting.connection import RemotingConnection

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=16)
_offset_id = st.one_of(
    st.none(),
    st.just(""),
    _text,
    st.builds(msgid.offset_message_id, st.just("127.0.0.1"), st.integers(1, 65535), st.integers(0, 2**62)),
)


@settings(max_examples=300, deadline=None)
@given(
    group=_text,
    topic=_text,
    message_id=_text,
    transaction_id=_text,
    commit_log_offset=st.integers(-(2**63), 2**63 - 1),
    queue_offset=st.integers(-(2**63), 2**63 - 1),
    offset_message_id=_offset_id,
    commit=st.sampled_from([True, False, None]),
    from_check=st.booleans(),
    first_opaque=st.integers(0, 2**31 - 1),
)
def test_pre_rendered_end_frames_equal_the_generic_ones(
    group: str,
    topic: str,
    message_id: str,
    transaction_id: str,
    commit_log_offset: int,
    queue_offset: int,
    offset_message_id: str | None,
    commit: bool | None,
    from_check: bool,
    first_opaque: int,
) -> None:
    ref = TransactionRef(
        topic, message_id, transaction_id, commit_log_offset, queue_offset, offset_message_id, "broker-a"
    )
    ext = _end_fields(ref, group, commit, from_check)
    for serialize_type in SerializeType:
        fast = RemotingConnection(first_opaque=first_opaque, serialize_type=serialize_type)
        generic = RemotingConnection(first_opaque=first_opaque, serialize_type=serialize_type)
        if serialize_type is SerializeType.JSON:
            data = fast.send_json_oneway(
                RequestCode.END_TRANSACTION, _end_json(ref, group, commit, from_check)
            )
        else:
            rendered = _end_binary(ref, group, commit, from_check)
            # the parts kept per group and topic give the pair-by-pair reference's bytes, cached or not
            assert rendered == _end_binary_pairs(ref, group, commit, from_check)
            assert _end_binary(ref, group, commit, from_check) == rendered
            data = fast.send_binary_oneway(RequestCode.END_TRANSACTION, rendered)
        expected = generic.send(generic.new_request(RequestCode.END_TRANSACTION, ext, oneway=True))
        assert data == expected
        assert fast.pending == {} and generic.pending == {}
        decoded = frame.decode(data)
        assert decoded.flag & RPC_ONEWAY and decoded.ext_fields == ext
        assert decoded.serialize_type is serialize_type
        # the next opaque is the same too
        assert fast.new_request(1).opaque == generic.new_request(1).opaque


def test_a_reference_with_text_that_is_not_str_is_refused_by_the_fast_form() -> None:
    ref = TransactionRef("t", b"not text", "tx")  # type: ignore[arg-type]
    for render in (_end_json, _end_binary, _end_binary_pairs):
        try:
            render(ref, "g", True, False)
        except TypeError:
            pass
        else:
            raise AssertionError(
                f"{render.__name__} must refuse a non-str field (the caller then goes the general way)"
            )


def test_a_group_or_topic_that_is_not_str_is_refused_even_after_its_text_was_kept() -> None:
    """A bytes group or topic is refused by both binary forms, also when the same text as ``str`` was
    rendered (and kept) just before."""
    good = TransactionRef("topic", "id", "tx", 1, 2, None, "broker-a")
    assert _end_binary(good, "group", True, False) == _end_binary_pairs(good, "group", True, False)
    bad_topic = TransactionRef(b"topic", "id", "tx", 1, 2, None, "broker-a")  # type: ignore[arg-type]
    for render in (_end_binary, _end_binary_pairs):
        for ref, group in ((good, b"group"), (bad_topic, "group")):
            try:
                render(ref, group, True, False)  # type: ignore[arg-type]
            except TypeError:
                continue
            raise AssertionError(f"{render.__name__} took a field that is not str")
