"""``slot_init``: the faster MessageView constructor behaves like the dataclass-generated one."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from txmq.common.fastinit import slot_init
from txmq.common.message import MessageType, MessageView


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)


@slot_init
@dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)


def test_same_values_defaults_and_factories_as_the_generated_init() -> None:
    assert dataclasses.astuple(Fast(1)) == dataclasses.astuple(Plain(1)) == (1, "x", [])
    assert dataclasses.astuple(Fast(1, c=[2], b="y")) == (1, "y", [2])
    assert Fast(1).c is not Fast(1).c  # a fresh list per instance, as with default_factory


def test_still_frozen_and_still_checks_arguments() -> None:
    view = MessageView("t", b"body", "id", 1, 2, 3, 4, 5, keys=("k",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.topic = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        MessageView("t")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        MessageView("t", b"", "id", 1, 2, 3, 4, 5, nonsense=1)  # type: ignore[call-arg]


def test_message_view_fields_and_equality_unchanged() -> None:
    view = MessageView("t", b"body", "id", 1, 2, 3, 4, 5, tags="a", message_type=MessageType.FIFO)
    assert view.properties == {} and view.keys == () and view.delivery_attempt == 1
    assert view.tags == "a" and view.message_type is MessageType.FIFO and view.raw_properties is None
    assert dataclasses.replace(view, topic="u") == MessageView(
        "u", b"body", "id", 1, 2, 3, 4, 5, tags="a", message_type=MessageType.FIFO
    )


def test_refuses_classes_it_cannot_mirror() -> None:
    @dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = field(kw_only=True)

    with pytest.raises(TypeError):
        slot_init(KeywordOnly)


def test_send_result_keeps_the_dataclass_behaviour() -> None:
    from txmq.common.message import MessageQueue, SendResult

    queue = MessageQueue("t", 1)
    result = SendResult("id", queue, 7, offset_message_id="off")
    values = tuple(getattr(result, f.name) for f in dataclasses.fields(result))
    assert values == ("id", queue, 7, None, "off", None)
    assert result == SendResult(message_id="id", queue=queue, queue_offset=7, offset_message_id="off")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.queue_offset = 8  # type: ignore[misc]
    with pytest.raises(TypeError):
        SendResult("id")  # type: ignore[call-arg]


def test_a_coerced_field_is_converted_only_when_not_of_its_type() -> None:
    @dataclass(frozen=True, slots=True)
    class Boxed:
        data: bytes
        label: str = ""

    seen: list[object] = []

    def convert(value: object) -> object:
        seen.append(value)
        return bytes(value) if isinstance(value, bytearray) else value

    made = slot_init(Boxed, coerce={"data": (bytes, convert)})
    raw = b"kept"
    assert made(raw).data is raw and seen == []
    assert made(bytearray(b"ba"), label="l") == Boxed(b"ba", "l") and seen == [bytearray(b"ba")]
    with pytest.raises(TypeError, match="no such field"):
        slot_init(Plain, coerce={"nope": (int, int)})


@pytest.mark.parametrize("body", [bytearray(b"payload"), memoryview(b"payload"), memoryview(b"xpayload")[1:]])
def test_a_message_body_given_as_a_buffer_is_stored_and_sent_as_bytes(body: bytearray | memoryview) -> None:
    """Compiled or pure, a bytearray or memoryview body is stored as bytes: compiled code reads
    ``Message.body`` as bytes, so it must not see another type (it raised "bytes object expected")."""
    from txmq.common.message import Message

    message = Message("orders", body)  # type: ignore[arg-type]
    assert type(message.body) is bytes and message.body == b"payload"
    message.validate()
    assert dataclasses.replace(message, body=bytearray(b"other")).body == b"other"  # type: ignore[arg-type]


@pytest.mark.parametrize("body", ["text", 12, None, [1, 2]])
def test_a_message_body_of_another_type_is_refused_with_invalid_argument(body: object) -> None:
    from txmq.common import errors
    from txmq.common.message import Message

    with pytest.raises(errors.InvalidArgument, match="body must be bytes"):
        Message("orders", body).validate()  # type: ignore[arg-type]
