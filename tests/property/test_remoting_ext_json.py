"""The JSON header's extFields are written exactly as ``json`` writes them (any text, any values)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from txmq.protocol.remoting import frame
from txmq.protocol.remoting.command import RemotingCommand


@given(st.dictionaries(st.text(), st.text()))
def test_ext_json_is_json_dumps(ext: dict[str, str]) -> None:
    assert frame._ext_json(ext) == json.dumps(ext, separators=(",", ":"))


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.none() | st.booleans() | st.text(max_size=5)))
def test_other_values_fall_back_to_json(ext: dict[str, object]) -> None:
    assert frame._ext_json(ext) == json.dumps(ext, separators=(",", ":"))  # type: ignore[arg-type]


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=5))
def test_headers_round_trip(ext: dict[str, str]) -> None:
    cmd = RemotingCommand(code=0, opaque=7, flag=1, ext_fields=ext)
    decoded = frame.decode_frame(frame.encode(cmd))
    assert decoded is not None
    assert decoded[0].ext_fields == ext
