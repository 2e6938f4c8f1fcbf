"""One record's C encoder (``_batchenc.encode_record``, behind ``codec.encode_into``) against its
Python reference ``codec.encode_into_py``: the same bytes for every field value in range (edge
values included: the widest integers, a 65,535-byte property text, big offsets, the longest names),
nothing written outside the record, and a field out of range, a name too long or a buffer too short
refused with the Python path's error, the buffer left as it was.

The C path runs where the extension is built; ``test_pure_falls_back_to_the_reference`` checks that
``TXMQ_PURE=1`` (no extension) takes ``encode_into_py``."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import subprocess_env
from txmq.storage import codec

NATIVE: Any = codec.BATCHENC
native_only = pytest.mark.skipif(NATIVE is None, reason="txmq.storage._batchenc is not built")

I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
I32_EDGES = st.sampled_from([-(1 << 31), -1, 0, 1, (1 << 31) - 1])
I64_EDGES = st.sampled_from([-(1 << 63), -1, 0, 1, (1 << 32), (1 << 62), (1 << 63) - 1])


def _int32() -> st.SearchStrategy[int]:
    return st.one_of(I32, I32_EDGES)


def _int64() -> st.SearchStrategy[int]:
    return st.one_of(I64, I64_EDGES)


fields_strategy = st.builds(
    codec.RecordFields,
    topic=st.one_of(st.sampled_from([b"", b"T", "é".encode(), b"t" * 127]), st.binary(max_size=300)),
    queue_id=_int32(),
    body=st.one_of(st.binary(max_size=2000), st.sampled_from([b"", b"x" * 1024])),
    properties=st.one_of(st.binary(max_size=300), st.sampled_from([b"", b"p" * 65535])),
    tags_code=_int64(),
    flag=_int32(),
    sys_flag=_int32(),
    born_timestamp_ms=_int64(),
    born_host=st.one_of(st.sampled_from([b"", b"10.0.0.2:5555", b"h" * 255]), st.binary(max_size=255)),
    reconsume_times=_int32(),
    prepared_transaction_offset=_int64(),
    index_keys=st.just(()),
)
store_hosts = st.one_of(st.sampled_from([b"", b"10.1.2.3:10911", b"s" * 255]), st.binary(max_size=255))


def _run(encode: Any, buf: bytearray, pos: int, fields: codec.RecordFields, store_host: bytes,
         queue_offset: int, physical: int, store_ms: int) -> Any:  # fmt: skip
    return encode(buf, pos, fields, store_host=store_host, queue_offset=queue_offset,
                  physical_offset=physical, store_timestamp_ms=store_ms)  # fmt: skip


def _outcome(encode: Any, size: int, pos: int, pad: int, *args: Any) -> tuple[Any, bytes]:
    """What ``encode`` returns or raises (type and text), and the buffer after it."""
    buf = bytearray(b"\xee" * (pos + size + pad))
    try:
        result: Any = _run(encode, buf, pos, *args)
    except Exception as exc:  # compared as values
        result = (type(exc), str(exc))
    return result, bytes(buf)


@native_only
@settings(max_examples=500, deadline=None)
@given(
    fields=fields_strategy,
    store_host=store_hosts,
    pos=st.integers(0, 9),
    pad=st.integers(0, 5),
    queue_offset=_int64(),
    physical=_int64(),
    store_ms=_int64(),
)
def test_the_c_encoder_writes_the_python_encoders_bytes(
    fields: codec.RecordFields, store_host: bytes, pos: int, pad: int, queue_offset: int, physical: int,
    store_ms: int,
) -> None:  # fmt: skip
    size = codec.encoded_size(fields.topic, fields.born_host, store_host, fields.properties, fields.body)
    args = (fields, store_host, queue_offset, physical, store_ms)
    got, got_buf = _outcome(codec.encode_into, size, pos, pad, *args)
    want, want_buf = _outcome(codec.encode_into_py, size, pos, pad, *args)
    assert got == want == size
    assert got_buf == want_buf  # the padding around the record (0xee) is untouched by both


@native_only
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queue_id", 1 << 31), ("queue_id", -(1 << 31) - 1), ("queue_id", 1 << 70), ("flag", 1 << 40),
        ("sys_flag", -(1 << 31) - 1), ("reconsume_times", 1 << 31), ("tags_code", 1 << 63),
        ("tags_code", -(1 << 63) - 1), ("born_timestamp_ms", -(1 << 63) - 1),
        ("prepared_transaction_offset", 1 << 64), ("properties", b"p" * 65536), ("topic", b"t" * 65536),
        ("born_host", b"h" * 256),
    ],
)  # fmt: skip
def test_an_out_of_range_field_is_refused_as_the_python_encoder_refuses_it(field: str, value: Any) -> None:
    """The same exception type and text; the C encoder checks everything before it writes, so its
    buffer is left as it was (the Python path may have packed the header before it fails)."""
    record = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 1_700_000_000_000, b"h:1", 0, 0, ())
    bad = record._replace(**{field: value})
    args = (bad, b"s:1", 0, 0, 0)
    got, got_buf = _outcome(codec.encode_into, 70_000, 3, 0, *args)
    want, _ = _outcome(codec.encode_into_py, 70_000, 3, 0, *args)
    assert got == want
    assert got[0] in (struct.error, OverflowError)
    assert got_buf == b"\xee" * len(got_buf)


@native_only
@pytest.mark.parametrize(("field", "value"), [("flag", "1"), ("born_timestamp_ms", 1.0), ("body", "text")])
def test_a_field_of_another_type_is_refused(field: str, value: Any) -> None:
    """A field that is not what ``RecordFields`` declares: the compiled Python path refuses it with
    ``TypeError`` (mypyc's check), the interpreted one with struct.error; the C encoder with one of
    them, and before it writes."""
    record = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 1_700_000_000_000, b"h:1", 0, 0, ())
    args = (record._replace(**{field: value}), b"s:1", 0, 0, 0)
    for encode in (codec.encode_into, codec.encode_into_py):
        got, got_buf = _outcome(encode, 600, 0, 0, *args)
        assert got[0] in (TypeError, struct.error)
    got, got_buf = _outcome(codec.encode_into, 600, 0, 0, *args)
    assert got_buf == b"\xee" * len(got_buf)


@native_only
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("queue_offset", 1 << 63),
        ("physical", -(1 << 63) - 1),
        ("store_ms", 1 << 64),
        ("store_host", b"s" * 256),
    ],
)
def test_an_out_of_range_argument_is_refused_as_the_python_encoder_refuses_it(name: str, value: Any) -> None:
    record = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 1_700_000_000_000, b"h:1", 0, 0, ())
    kwargs: dict[str, Any] = {
        "store_host": b"s:1",
        "queue_offset": 0,
        "physical": 0,
        "store_ms": 0,
        name: value,
    }
    args = (record, kwargs["store_host"], kwargs["queue_offset"], kwargs["physical"], kwargs["store_ms"])
    got, got_buf = _outcome(codec.encode_into, 600, 0, 0, *args)
    want, _ = _outcome(codec.encode_into_py, 600, 0, 0, *args)
    assert got == want
    assert got_buf == b"\xee" * len(got_buf)


@native_only
@settings(max_examples=200, deadline=None)
@given(fields=fields_strategy, pos=st.integers(0, 9), data=st.data())
def test_a_buffer_too_short_is_refused_and_left_as_it_was(
    fields: codec.RecordFields, pos: int, data: st.DataObject
) -> None:
    """struct.error (pack_into's text, for the whole record), and not a byte written; where even
    the header does not fit, the Python path raises the same error (beyond, it is no reference: a
    bytearray's slice assignment would grow the buffer, which the writer never lets happen)."""
    size = codec.encoded_size(fields.topic, fields.born_host, b"s:1", fields.properties, fields.body)
    short = data.draw(st.integers(1, size + pos))
    buf = bytearray(b"\xee" * (pos + size - short))
    with pytest.raises(struct.error, match="pack_into requires a buffer of at least") as raised:
        codec.encode_into(buf, pos, fields, store_host=b"s:1", queue_offset=0, physical_offset=0,
                          store_timestamp_ms=0)  # fmt: skip
    assert buf == b"\xee" * (pos + size - short)
    assert f"at least {pos + size} bytes for packing {size} bytes at offset {pos}" in str(raised.value)
    if len(buf) < pos + codec.HEADER_BYTES:
        with pytest.raises(struct.error, match="pack_into requires a buffer of at least"):
            codec.encode_into_py(bytearray(len(buf)), pos, fields, store_host=b"s:1", queue_offset=0,
                                 physical_offset=0, store_timestamp_ms=0)  # fmt: skip


@native_only
def test_bad_arguments_raise_and_write_nothing() -> None:
    record = codec.RecordFields(b"T", 0, b"body", b"", 0, 0, 0, 1_700_000_000_000, b"h:1", 0, 0, ())
    buf = bytearray(200)
    with pytest.raises(struct.error, match="out of range"):
        NATIVE.encode_record(buf, -1, record, b"s:1", 0, 0, 0)
    with pytest.raises(TypeError):
        NATIVE.encode_record(buf, 0, record[:5], b"s:1", 0, 0, 0)
    with pytest.raises(TypeError):
        NATIVE.encode_record(buf, 0, record._replace(topic="T"), b"s:1", 0, 0, 0)
    with pytest.raises(TypeError):
        NATIVE.encode_record(buf, 0, record, "s:1", 0, 0, 0)
    with pytest.raises(TypeError):
        NATIVE.encode_record(buf, 0, record._replace(body="text"), b"s:1", 0, 0, 0)
    with pytest.raises(TypeError):
        NATIVE.encode_record(buf, 0, record, b"s:1", 0, 0)
    with pytest.raises(BufferError):
        NATIVE.encode_record(b"\0" * 200, 0, record, b"s:1", 0, 0, 0)
    assert buf == bytearray(200)


def test_pure_falls_back_to_the_reference(tmp_path: Path) -> None:
    """TXMQ_PURE=1: no extension, and ``encode_into`` is the Python reference's bytes."""
    script = (
        "from txmq.storage import codec\n"
        "r = codec.RecordFields(b'T', 1, b'body', b'a\\x01b\\x02', 5, 0, 4, 17, b'h:1', 0, 7, ())\n"
        "buf = bytearray(200)\n"
        "n = codec.encode_into(buf, 0, r, store_host=b's:1', queue_offset=9, physical_offset=123,"
        " store_timestamp_ms=17)\n"
        "print(codec.BATCHENC is None, buf[:n].hex())\n"
    )
    env = {**subprocess_env(tmp_path), "TXMQ_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    pure, data = out.stdout.split()
    record = codec.RecordFields(b"T", 1, b"body", b"a\x01b\x02", 5, 0, 4, 17, b"h:1", 0, 7, ())
    want = codec.encode(record, store_host=b"s:1", queue_offset=9, physical_offset=123, store_timestamp_ms=17)
    assert pure == "True"
    assert bytes.fromhex(data) == want
