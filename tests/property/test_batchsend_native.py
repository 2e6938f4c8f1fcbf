"""The C loops of the SDK's batch send (``client/_batchsend.c``) against their references in
``_single``: ``results`` against ``results_py`` (for every input it answers, the same ``SendResult``
list, field by field; for what it leaves to the reference (an id list that is not a list, a
``msg_id`` that is not ASCII, an offset base outside int64) None), and ``plain_total`` against
``plain_total_py`` (the same total, or -1). Skipped when the extension is not built (no compiler,
``TXMQ_PURE=1``); ``tests/client/test_producer.py`` holds ``send_batch``'s errors with it."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.client import _single as single
from txmq.common.message import Message, MessageQueue, SendResult

try:
    _batchsend = importlib.import_module("txmq.client._batchsend")
except ImportError:
    _batchsend = None

pytestmark = pytest.mark.skipif(_batchsend is None, reason="the _batchsend C extension is not built")

_QUEUE = MessageQueue("orders", 3, "broker-a")
_FIELDS = [f.name for f in dataclasses.fields(SendResult)]
_OPTIONAL = st.one_of(st.none(), st.text(max_size=12))
_MSG_IDS = st.one_of(
    st.lists(st.text("0123456789ABCDEF", max_size=32), max_size=8).map(",".join),
    st.text(",AB", max_size=12),
    st.text(max_size=12),  # non-ASCII ones: the reference's
)


def _fields(results: list[SendResult]) -> list[list[tuple[object, type]]]:
    return [[(getattr(r, name), type(getattr(r, name))) for name in _FIELDS] for r in results]


@settings(max_examples=400, deadline=None)
@given(
    ids=st.lists(st.text(max_size=6), max_size=8),
    base=st.one_of(st.integers(0, 2**40), st.integers(-(2**64), 2**64)),
    transaction_id=_OPTIONAL,
    msg_id=_MSG_IDS,
    recall=_OPTIONAL,
)
@example(ids=["a", "b"], base=2**63 - 2, transaction_id=None, msg_id="X", recall=None)
@example(ids=["a", "b"], base=2**63 - 1, transaction_id=None, msg_id="X", recall=None)
@example(ids=["a", "b", "c"], base=-(2**63), transaction_id="t", msg_id="", recall="r")
@example(ids=["a", "b"], base=0, transaction_id=None, msg_id="A,B,C,,", recall=None)
@example(ids=["a", "b", "c"], base=0, transaction_id=None, msg_id=",", recall=None)
def test_the_c_results_are_the_reference(
    ids: list[str], base: int, transaction_id: str | None, msg_id: str, recall: str | None
) -> None:
    expected = single.results_py(ids, _QUEUE, base, transaction_id, msg_id, recall)
    made = _batchsend.results(ids, _QUEUE, base, transaction_id, msg_id, recall)
    in_c = msg_id.isascii() and base >= -(2**63) and base + len(ids) <= 2**63 - 1
    if not in_c:
        assert made is None
        return
    assert made is not None
    assert made == expected
    assert _fields(made) == _fields(expected)
    assert all(type(r) is SendResult for r in made)
    assert all(r.queue is _QUEUE for r in made)
    assert [repr(r) for r in made] == [repr(r) for r in expected]
    assert [hash(r) for r in made] == [hash(r) for r in expected]


def test_what_it_declines_goes_to_the_reference() -> None:
    assert _batchsend.results(("a", "b"), _QUEUE, 0, None, "X,Y", None) is None  # not a list
    assert _batchsend.results(["a", "b"], _QUEUE, 1.0, None, "X,Y", None) is None  # not an int
    assert _batchsend.results(["a", "b"], _QUEUE, 0, None, b"X,Y", None) is None  # not a str
    assert _batchsend.results(["a", "b"], _QUEUE, 2**63 - 1, None, "X", None) is None  # past int64


def test_the_results_hold_their_references() -> None:
    """Each value the results hold is referenced once more per result, and released with them."""
    queue = MessageQueue("refs", 1, "broker-b")
    tx = "".join(["tx-", "x" * 20])
    before = sys.getrefcount(queue), sys.getrefcount(tx)
    made = _batchsend.results(["i1", "i2", "i3"], queue, 5, tx, "A,B", None)
    assert made is not None
    assert (sys.getrefcount(queue), sys.getrefcount(tx)) == (before[0] + 3, before[1] + 3)
    assert [r.offset_message_id for r in made] == ["A", "B", None]
    assert [r.queue_offset for r in made] == [5, 6, 7]
    del made
    assert (sys.getrefcount(queue), sys.getrefcount(tx)) == before


def test_setup_refuses_another_layout() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Other:
        message_id: str
        queue: object

    messages = tuple(f.name for f in dataclasses.fields(Message))
    with pytest.raises(TypeError):
        _batchsend.setup(Other, ("message_id", "queue"), Message, messages)
    with pytest.raises(TypeError):
        _batchsend.setup(SendResult, tuple(reversed(_FIELDS)), Message, messages)
    with pytest.raises(TypeError):
        _batchsend.setup(SendResult, tuple(_FIELDS), Message, messages[1:])
    with pytest.raises(TypeError):
        _batchsend.setup(SendResult, tuple(_FIELDS), Other, ("message_id", "queue"))


def test_the_sdk_uses_the_c_loops() -> None:
    assert single._RESULTS is _batchsend.results
    assert single.PLAIN_TOTAL is _batchsend.plain_total


class _SubMessage(Message):
    __slots__ = ()


_BODIES = st.one_of(st.binary(min_size=1, max_size=8), st.just(b""), st.just(b"x" * 20))


def _message(kind: str, body: bytes) -> Any:
    make: dict[str, Any] = {
        "plain": lambda: Message("orders", body),
        "other topic": lambda: Message("other", body),
        "equal topic": lambda: Message("".join(["ord", "ers"]), body),
        "tags": lambda: Message("orders", body, tags="t"),
        "keys": lambda: Message("orders", body, keys=("k",)),
        "keys list": lambda: Message("orders", body, keys=[]),
        "group": lambda: Message("orders", body, message_group="g"),
        "delivery": lambda: Message("orders", body, delivery_timestamp_ms=5),
        "delay": lambda: Message("orders", body, delay_level=1),
        "delay 0": lambda: Message("orders", body, delay_level=0),
        "transactional": lambda: Message("orders", body, transactional=True),
        "transactional 0": lambda: Message("orders", body, transactional=0),
        "properties": lambda: Message("orders", body, properties={"a": "b"}),
        "id": lambda: Message("orders", body, message_id="ID"),
        "subclass": lambda: _SubMessage("orders", body),
        "not a message": lambda: (body,),
        "str body": lambda: Message("orders", "text"),  # type: ignore[arg-type]
    }
    return make[kind]()


_KINDS = st.sampled_from(
    ["plain"] * 6
    + [
        "other topic", "equal topic", "tags", "keys", "keys list", "group", "delivery", "delay", "delay 0",
        "transactional", "transactional 0", "properties", "id", "subclass", "not a message", "str body",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    rows=st.lists(st.tuples(_KINDS, _BODIES), max_size=8),
    as_tuple=st.booleans(),
    body_max=st.sampled_from([8, 20, 4 * 1024 * 1024]),
)
def test_plain_total_is_the_reference(rows: list[tuple[str, bytes]], as_tuple: bool, body_max: int) -> None:
    messages = [_message(kind, body) for kind, body in rows]
    batch: Any = tuple(messages) if as_tuple else messages
    got = _batchsend.plain_total(batch, "orders", body_max)
    assert got == single.plain_total_py(batch, "orders", body_max)
    kinds = {kind for kind, _ in rows}
    if kinds <= {"plain", "equal topic", "properties", "id"} and all(0 < len(b) <= body_max for _, b in rows):
        assert got == sum(len(b) for _, b in rows)  # what the reference must take
    else:
        assert got == -1


def test_plain_total_leaves_other_sequences_to_the_loop() -> None:
    messages = [Message("orders", b"a"), Message("orders", b"bc")]
    assert _batchsend.plain_total(messages, "orders", 10) == 3
    assert _batchsend.plain_total(iter(messages), "orders", 10) == -1
    assert _batchsend.plain_total(messages, b"orders", 10) == -1
    assert _batchsend.plain_total([], "orders", 10) == 0
