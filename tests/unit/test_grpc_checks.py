"""protocol/grpc/checks: the send lane's batched checks refuse exactly what the per-field checks do."""

from __future__ import annotations

import pytest

from txmq.common import errors
from txmq.common.message import LeanMessage
from txmq.protocol.grpc import checks


def _lean(
    tag: str | None = None,
    keys: tuple[str, ...] = (),
    group: str | None = None,
    message_id: str | None = "ID1",
) -> LeanMessage:
    return LeanMessage(b"x", {}, tag, keys, message_id, group)


@pytest.mark.parametrize(
    ("batch", "error"),
    [
        (
            [_lean(tag="g" * 64, group="g" * 64)],
            errors.InvalidMessageGroup,
        ),  # a tag passing is no group passing
        ([_lean(group="ok"), _lean(tag="ok|no")], errors.InvalidTag),
        ([_lean(tag="t"), _lean(tag="t", keys=("k\x85",))], errors.InvalidKey),
        ([_lean(group="é" * 32)], errors.InvalidMessageGroup),  # 64 UTF-8 bytes
        ([_lean(), _lean(message_id=None)], errors.InvalidMessageId),
        ([_lean(message_id=" ")], errors.InvalidMessageId),
        ([_lean(group="g" * 64), _lean(tag="a|b")], errors.InvalidMessageGroup),  # message order first
        ([_lean(keys=("k\x00",)), _lean(message_id=None)], errors.InvalidKey),
        ([_lean(tag="标签", keys=("键",), group="é" * 31)], None),  # 62 bytes, no control character
    ],
)
def test_check_lean_refuses_what_check_fields_refuses(batch: list[LeanMessage], error: type | None) -> None:
    def one_by_one() -> None:
        for m in batch:
            checks.check_fields(m.tags or "", m.keys, m.message_group or "", m.properties, m.message_id or "")

    for run in (one_by_one, lambda: checks.check_lean(batch)):
        if error is None:
            run()
        else:
            with pytest.raises(error):
                run()


@pytest.mark.parametrize("size", [1, 3])
def test_keys_with_spaces_are_split_as_the_apache_proxy_stores_them(size: int) -> None:
    """The proxy joins a message's keys with a space into KEYS and the broker indexes each part: a key
    "a b" is the keys a and b (it was refused, 40005). Blank keys stay refused; empty ones vanish."""
    plain = [_lean(keys=("k1",)) for _ in range(size - 1)]
    spaced = _lean(keys=("order-1 user-7", "", "x"))
    checked = checks.check_lean([*plain, spaced])
    assert [m.keys for m in checked] == [("k1",)] * (size - 1) + [("order-1", "user-7", "x")]
    assert checks.check_lean(plain) is plain  # nothing to split: the same list, no copy
    with pytest.raises(errors.InvalidKey, match="whitespace"):
        checks.check_lean([*plain, _lean(keys=("  ",))])
    assert checks.split_keys(("a", "b")) is None
