"""``codec.stored_record`` (the StoredRecord built from a record's raw fields, ``MessageStore.read_queue``'s
path) against ``codec.decode`` (the full decode every single read uses): for arbitrary records,
including topics and hosts that are not UTF-8, the same record or the same error."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from txmq.common.errors import CorruptRecord
from txmq.storage import codec
from txmq.storage.api import StoredRecord

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
# mostly text, now and then bytes that are not UTF-8
_NAMES = st.one_of(st.text(max_size=20).map(str.encode), st.binary(max_size=20))
fields_st = st.builds(
    codec.RecordFields,
    topic=st.one_of(st.text(min_size=1, max_size=40).map(str.encode), st.binary(min_size=1, max_size=8)),
    queue_id=st.integers(0, 1023),
    body=st.binary(max_size=300),
    properties=st.binary(max_size=60),
    tags_code=I64,
    flag=I32,
    sys_flag=I32,
    born_timestamp_ms=I64,
    born_host=_NAMES,
    reconsume_times=I32,
    prepared_transaction_offset=I64,
)


def _outcome(make: object) -> StoredRecord | tuple[type[Exception], str]:
    try:
        return make()  # type: ignore[operator,no-any-return]
    except CorruptRecord as exc:
        return type(exc), str(exc)


@settings(max_examples=400, deadline=None)
@given(
    fields=fields_st,
    store_host=_NAMES,
    queue_offset=st.integers(0, 2**40),
    physical_offset=st.integers(0, 2**50),
    store_ms=I64,
)
def test_stored_record_is_the_decoded_record(
    fields: codec.RecordFields, store_host: bytes, queue_offset: int, physical_offset: int, store_ms: int
) -> None:
    encoded = codec.encode(fields, store_host=store_host, queue_offset=queue_offset,
                           physical_offset=physical_offset, store_timestamp_ms=store_ms)  # fmt: skip
    data = b"\x00" * 7 + encoded  # not at the buffer's start, as in a run of records
    raw = codec.split(data, 7)
    expected = _outcome(lambda: codec.decode(data, 7, offset=physical_offset))
    assert _outcome(lambda: codec.stored_record(raw)) == expected
    assert _outcome(lambda: codec.stored_record(raw)) == expected  # the names' text now cached
