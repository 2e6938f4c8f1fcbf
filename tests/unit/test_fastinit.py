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
