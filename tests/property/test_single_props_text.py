"""A single send's property text is byte for byte the general encode's, and fails with the same error.

``_remoting_convert.properties_text`` renders a message's properties as one text (no dict, no encode);
the reference builds ``message_properties`` and ``props.encode``s it (``_single.props_text``). Messages
with awkward values (separators, lone surrogates, over-long values, empty strings, system keys among
the user's) must give the same text or the same error, and so must the whole SEND_MESSAGE_V2 header.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.property.test_batch_body import _TEXT, messages
from txmq.client import _single
from txmq.client._remoting_convert import message_properties, properties_text
from txmq.common import errors
from txmq.common.message import Message


def _outcome(call: object) -> tuple[str, str]:
    assert callable(call)
    try:
        return "ok", call()
    except errors.TxmqError as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=1000, deadline=None)
@given(
    message=messages(),
    message_id=st.sampled_from(["ID-1", "0123456789ABCDEF"]) | _TEXT,
    producer_group=st.sampled_from(["", "pg", "p\x01g", "é"]),
)
@example(message=Message("T", b"x", tags="a\x02b"), message_id="I", producer_group="pg")
@example(message=Message("T", b"x", keys=("k\x01",)), message_id="I", producer_group="")
@example(message=Message("T", b"x", properties={"": "v"}), message_id="I", producer_group="pg")
@example(message=Message("T", b"x", properties={"a": "é"}), message_id="I", producer_group="pg")
@example(message=Message("T", b"x", properties={"a": "x" * 40_000}), message_id="I", producer_group="pg")
@example(message=Message("T", b"x", properties={"a": "\ud800"}), message_id="I", producer_group="pg")
@example(
    message=Message("T", b"x", properties={str(i): "v" for i in range(200)}),
    message_id="I",
    producer_group="",
)
@example(message=Message("T", b"x", tags="t", keys=("a", "b")), message_id="I", producer_group="pg")
def test_properties_text_is_the_general_encode(
    message: Message, message_id: str, producer_group: str
) -> None:
    new = _outcome(lambda: properties_text(message, message_id, producer_group))
    old = _outcome(lambda: _single.props_text(message_properties(message, message_id, producer_group)))
    assert new == old
