"""Error <-> response code mapping."""

from __future__ import annotations

import pytest

from txmq.common import errors
from txmq.protocol.remoting.codes import ResponseCode
from txmq.protocol.remoting.status import error_for_response, response_code_for


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.TopicNotFound("t"), ResponseCode.TOPIC_NOT_EXIST),
        (errors.MessageNotFound("m"), ResponseCode.QUERY_NOT_FOUND),
        (errors.MessageTooLarge("body", 5, 4), ResponseCode.MESSAGE_ILLEGAL),
        (errors.InvalidFilter("f"), ResponseCode.SUBSCRIPTION_PARSE_FAILED),
        (errors.TooManyRequests("busy"), ResponseCode.SYSTEM_BUSY),
        (errors.StoreFenced("x"), ResponseCode.SERVICE_NOT_AVAILABLE),
        (errors.CorruptRecord("x"), ResponseCode.SYSTEM_ERROR),
        (RuntimeError("bug"), ResponseCode.SYSTEM_ERROR),
    ],
)
def test_response_code_for(exc: Exception, code: ResponseCode) -> None:
    assert response_code_for(exc) == code


def test_error_for_response() -> None:
    err = error_for_response(ResponseCode.TOPIC_NOT_EXIST, "topic T not exist")
    assert type(err) is errors.TopicNotFound
    assert "topic T not exist" in str(err)
    assert type(error_for_response(ResponseCode.SYSTEM_BUSY, None)) is errors.TooManyRequests
    assert error_for_response(ResponseCode.SYSTEM_BUSY, None).retriable
    assert type(error_for_response(9999, "?")) is errors.TxmqError
