"""A batch's column checks in C against their Python reference: ``_batchenc.columns_fit`` (one pass
over the columns ``store._check_records`` checks) answers True only where the Python conjunction of
``_check_records`` holds, and for columns of exact bytes and ints exactly where it holds; and
``_batchenc.record_sizes`` (``codec.batch_sizes``' loop for one topic and host) is
``codec.record_sizes_py``, or None for anything but exact bytes. Values sit on and around every bound
(queue id, body, properties, born host, int32 and int64 fields), properties step outside ASCII.
Skipped when the extension is not built."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from txmq.common import limits
from txmq.common.errors import TxmqError
from txmq.storage import codec, store
from txmq.storage.api import RecordFields

NATIVE: Any = codec.BATCHENC
pytestmark = pytest.mark.skipif(NATIVE is None, reason="txmq.storage._batchenc is not built")

_I32, _I64 = 1 << 31, 1 << 63
TOPIC = "t"


def _python_fit(topic: str, columns: tuple[Any, ...]) -> bool:
    """The column checks of ``store._check_records`` as it writes them (its reference)."""
    (topics, queue_ids, bodies, properties, tags_codes, flags, sys_flags, born_ms, born_hosts, reconsume,
     prepared, _) = columns  # fmt: skip
    return bool(
        topics.count(topic.encode()) == len(topics)
        and store._within(0, limits.queue_id_max + 1, queue_ids)
        and store._longest(bodies) <= limits.body_bytes_max
        and store._longest(properties) <= limits.properties_bytes_max
        and b"".join(properties).isascii()
        and store._longest(born_hosts) <= 255
        and store._within(-_I32, _I32, flags, sys_flags, reconsume)
        and store._within_i64(tags_codes, born_ms, prepared)
    )


def _fit(columns: tuple[Any, ...]) -> bool:
    got = NATIVE.columns_fit(
        TOPIC.encode(), columns, limits.queue_id_max, limits.body_bytes_max, limits.properties_bytes_max
    )
    assert type(got) is bool
    return bool(got)


_BYTES_LEN = st.sampled_from([0, 1, 7, 8, 9, 255, 256])
# per field: (values that pass, values on the wrong side of a bound); a record draws passing values
# and at most one field of one record is drawn from the failing ones, so every bound is what decides
_FIELDS: list[tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = [
    (st.just(b"t"), st.sampled_from([b"u", b"", b"tt"])),
    (st.sampled_from([0, 1, limits.queue_id_max]), st.sampled_from([-1, limits.queue_id_max + 1])),
    (st.one_of(_BYTES_LEN, st.just(limits.body_bytes_max)), st.just(limits.body_bytes_max + 1)),
    (st.one_of(_BYTES_LEN, st.just(limits.properties_bytes_max)), st.just(limits.properties_bytes_max + 1)),
    (st.none(), st.integers(0, 300)),  # a non-ASCII byte's place in the properties
    (st.sampled_from([-_I64, _I64 - 1, 0, -1, 2**40]), st.sampled_from([-_I64 - 1, _I64])),
    (st.sampled_from([-_I32, _I32 - 1, 0, 7]), st.sampled_from([-_I32 - 1, _I32])),
    (st.sampled_from([-_I32, _I32 - 1, 0, 7]), st.sampled_from([-_I32 - 1, _I32])),
    (st.sampled_from([-_I64, _I64 - 1, 0, 1 << 45]), st.sampled_from([-_I64 - 1, _I64])),
    (st.sampled_from([0, 1, 255]), st.just(256)),
    (st.sampled_from([-_I32, _I32 - 1, 0, 16]), st.sampled_from([-_I32 - 1, _I32])),
    (st.sampled_from([-_I64, _I64 - 1, 0, -1]), st.sampled_from([-_I64 - 1, _I64])),
]
_RECORD = st.tuples(*(good for good, _ in _FIELDS))


@st.composite
def _records(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    records = [list(r) for r in draw(st.lists(_RECORD, min_size=1, max_size=5))]
    if draw(st.booleans()):
        which = draw(st.integers(0, len(records) - 1))
        field = draw(st.integers(0, len(_FIELDS) - 1))
        records[which][field] = draw(_FIELDS[field][1])
    return [tuple(r) for r in records]


def _columns(records: list[tuple[Any, ...]], as_list: bool) -> tuple[Any, ...]:
    rows = []
    for (
        topic,
        queue_id,
        body_len,
        props_len,
        high_at,
        tags,
        flag,
        sys_flag,
        born,
        host_len,
        reconsume,
        prepared,
    ) in records:
        props = bytearray(b"k\x01v\x02" * (props_len // 4 + 1))[:props_len]
        if high_at is not None and props_len:
            props[high_at % props_len] = 0x80 | high_at % 0x7F
        rows.append(RecordFields(topic, queue_id, b"b" * body_len, bytes(props), tags, flag, sys_flag, born,
                                 b"h" * host_len, reconsume, prepared, ("k",)))  # fmt: skip
    cols = [list(col) if as_list else tuple(col) for col in zip(*rows, strict=True)]
    return tuple(cols) if cols else ((),) * 12


@settings(max_examples=500, deadline=None)
@given(records=_records(), as_list=st.booleans())
@example(records=[(b"t", 0, 1, 1, None, 0, 0, 0, 0, 0, 0, 0)], as_list=False)
@example(records=[(b"t", 0, 1, 9, 8, 0, 0, 0, 0, 0, 0, 0)], as_list=False)  # non-ASCII past the first word
def test_columns_fit_is_the_python_checks(records: list[tuple[Any, ...]], as_list: bool) -> None:
    columns = _columns(records, as_list)
    assert _fit(columns) is _python_fit(TOPIC, columns)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (1, True),
        (1, 1.0),
        (4, True),
        (5, 2**70),
        (2, bytearray(b"b")),
        (3, memoryview(b"p")),
        (8, "h"),
        (0, "t"),
    ],
)
def test_columns_fit_leaves_odd_types_to_python(column: int, value: object) -> None:
    """A value of another type (a bool, a float, a bytes-like, a str, a long int) is never passed by C:
    the Python checks judge it (and give the error they always gave)."""
    columns = list(_columns([(b"t", 0, 1, 1, None, 0, 0, 0, 0, 0, 0, 0)], as_list=False))
    assert _fit(tuple(columns)) is True
    columns[column] = (value,)
    assert _fit(tuple(columns)) is False
    assert _fit(tuple(columns[:11])) is False  # not the 12 columns
    assert _fit((*columns[:1], iter(columns[1]), *columns[2:])) is False  # a column not a tuple or list


def test_check_records_still_raises_what_it_raised() -> None:
    """Columns C refuses go to the Python checks and record by record: the same error as before."""
    columns = list(_columns([(b"t", 0, 1, 1, None, 0, 0, 0, 0, 0, 0, 0)] * 2, as_list=False))
    columns[2] = (b"b", b"b" * (limits.body_bytes_max + 1))
    with pytest.raises(TxmqError):
        store._check_records(TOPIC, tuple(columns))
    store._check_records(TOPIC, _columns([(b"t", 0, 1, 1, None, 0, 0, 0, 0, 0, 0, 0)] * 2, as_list=True))


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70)), max_size=8),
    fixed=st.integers(0, 1000),
    as_list=st.booleans(),
)
def test_record_sizes_is_the_loop(sizes: list[tuple[int, int]], fixed: int, as_list: bool) -> None:
    props = [b"p" * a for a, _ in sizes]
    bodies = [b"b" * b for _, b in sizes]
    if not as_list:
        props, bodies = tuple(props), tuple(bodies)  # type: ignore[assignment]
    assert NATIVE.record_sizes(fixed, props, bodies) == codec.record_sizes_py(fixed, props, bodies)


def test_record_sizes_leaves_the_rest_to_the_loop() -> None:
    assert NATIVE.record_sizes(5, (b"a",), (b"b", b"c")) is None  # lengths differ: the loop raises
    assert NATIVE.record_sizes(5, (b"a",), (memoryview(b"b"),)) is None
    assert NATIVE.record_sizes(5, iter([b"a"]), (b"b",)) is None
