"""One error tree for the whole of txmq.

::

    TxmqError                         retriable: ClassVar[bool]; code: ClassVar[int] (apache.rocketmq.v2.Code)
    ├── InvalidArgument               BAD_REQUEST: bad input from a caller; nothing was changed
    │   ├── InvalidTopic              ILLEGAL_TOPIC
    │   ├── InvalidGroup              ILLEGAL_CONSUMER_GROUP
    │   ├── InvalidTag                ILLEGAL_MESSAGE_TAG
    │   ├── InvalidKey                ILLEGAL_MESSAGE_KEY
    │   ├── InvalidMessageGroup       ILLEGAL_MESSAGE_GROUP
    │   ├── InvalidProperty           ILLEGAL_MESSAGE_PROPERTY_KEY
    │   ├── InvalidFilter             ILLEGAL_FILTER_EXPRESSION
    │   ├── InvalidInvisibleTime      ILLEGAL_INVISIBLE_TIME
    │   ├── InvalidDeliveryTime       ILLEGAL_DELIVERY_TIME
    │   ├── InvalidOffset             ILLEGAL_OFFSET
    │   ├── InvalidPollingTime        ILLEGAL_POLLING_TIME
    │   ├── InvalidReceiptHandle      INVALID_RECEIPT_HANDLE
    │   ├── InvalidTransactionId      INVALID_TRANSACTION_ID
    │   ├── MessageTypeConflict       MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    │   ├── MessageBodyEmpty          MESSAGE_BODY_EMPTY
    │   ├── MessageTooLarge           MESSAGE_BODY_TOO_LARGE (size, limit)
    │   ├── PropertiesTooLarge        MESSAGE_PROPERTIES_TOO_LARGE (size, limit)
    │   ├── PayloadTooLarge           PAYLOAD_TOO_LARGE (batches, frames)
    │   └── ClientIdRequired          CLIENT_ID_REQUIRED
    ├── NotFound                      NOT_FOUND
    │   ├── TopicNotFound             TOPIC_NOT_FOUND
    │   ├── GroupNotFound             CONSUMER_GROUP_NOT_FOUND
    │   ├── MessageNotFound           MESSAGE_NOT_FOUND
    │   └── OffsetNotFound            OFFSET_NOT_FOUND
    ├── Forbidden                     FORBIDDEN (system topics, missing permission)
    ├── Conflict                      PRECONDITION_FAILED (e.g. a second, different transaction decision)
    ├── TooManyRequests               TOO_MANY_REQUESTS, retriable (back-pressure)
    ├── Unsupported                   UNSUPPORTED
    ├── RequestTimeout                REQUEST_TIMEOUT, retriable
    │   └── SendTimeout               the SDK's in-flight window stayed full for the whole timeout
    ├── ClientClosed                  the SDK client was shut down (or never started)
    ├── StorageError                  INTERNAL_ERROR: the store failed an I/O operation
    │   ├── StoreFenced               a previous fsync/write failed; the store is read-only until restart
    │   ├── DiskFull                  ENOSPC
    │   └── CorruptRecord             a CRC or framing check failed (segment, position, reason)
    ├── ProtocolError                 a peer broke the wire protocol (the connection is closed)
    └── ConnectionError_              retriable: the peer is unreachable or went away

Every error carries a message a person can act on. ``for_code(code)`` maps a v2 code back to a class
(client side); the server maps an exception to a status in exactly one place per protocol.
"""

from __future__ import annotations

from typing import ClassVar

# apache.rocketmq.v2.Code values (definition.proto). Kept numeric so `common` needs no protobuf.
OK = 20000
BAD_REQUEST = 40000
ILLEGAL_TOPIC = 40002
ILLEGAL_CONSUMER_GROUP = 40003
ILLEGAL_MESSAGE_TAG = 40004
ILLEGAL_MESSAGE_KEY = 40005
ILLEGAL_MESSAGE_GROUP = 40006
ILLEGAL_MESSAGE_PROPERTY_KEY = 40007
INVALID_TRANSACTION_ID = 40008
ILLEGAL_MESSAGE_ID = 40009
ILLEGAL_FILTER_EXPRESSION = 40010
ILLEGAL_INVISIBLE_TIME = 40011
ILLEGAL_DELIVERY_TIME = 40012
INVALID_RECEIPT_HANDLE = 40013
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014
UNRECOGNIZED_CLIENT_TYPE = 40015
MESSAGE_CORRUPTED = 40016
CLIENT_ID_REQUIRED = 40017
ILLEGAL_POLLING_TIME = 40018
ILLEGAL_OFFSET = 40019
FORBIDDEN = 40300
NOT_FOUND = 40400
MESSAGE_NOT_FOUND = 40401
TOPIC_NOT_FOUND = 40402
CONSUMER_GROUP_NOT_FOUND = 40403
OFFSET_NOT_FOUND = 40404
REQUEST_TIMEOUT = 40800
PAYLOAD_TOO_LARGE = 41300
MESSAGE_BODY_TOO_LARGE = 41301
MESSAGE_BODY_EMPTY = 41302
PRECONDITION_FAILED = 42800
TOO_MANY_REQUESTS = 42900
MESSAGE_PROPERTIES_TOO_LARGE = 43101
INTERNAL_ERROR = 50000
INTERNAL_SERVER_ERROR = 50001
NOT_IMPLEMENTED = 50100
UNSUPPORTED = 50500


class TxmqError(Exception):
    """Root of every error txmq raises on purpose."""

    retriable: ClassVar[bool] = False
    code: ClassVar[int] = INTERNAL_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(TxmqError):
    code = BAD_REQUEST


class InvalidTopic(InvalidArgument):
    code = ILLEGAL_TOPIC


class InvalidGroup(InvalidArgument):
    code = ILLEGAL_CONSUMER_GROUP


class InvalidTag(InvalidArgument):
    code = ILLEGAL_MESSAGE_TAG


class InvalidKey(InvalidArgument):
    code = ILLEGAL_MESSAGE_KEY


class InvalidMessageGroup(InvalidArgument):
    code = ILLEGAL_MESSAGE_GROUP


class InvalidProperty(InvalidArgument):
    code = ILLEGAL_MESSAGE_PROPERTY_KEY


class InvalidMessageId(InvalidArgument):
    code = ILLEGAL_MESSAGE_ID


class InvalidFilter(InvalidArgument):
    code = ILLEGAL_FILTER_EXPRESSION


class InvalidInvisibleTime(InvalidArgument):
    code = ILLEGAL_INVISIBLE_TIME


class InvalidDeliveryTime(InvalidArgument):
    code = ILLEGAL_DELIVERY_TIME


class InvalidOffset(InvalidArgument):
    code = ILLEGAL_OFFSET


class InvalidPollingTime(InvalidArgument):
    code = ILLEGAL_POLLING_TIME


class InvalidReceiptHandle(InvalidArgument):
    code = INVALID_RECEIPT_HANDLE


class InvalidTransactionId(InvalidArgument):
    code = INVALID_TRANSACTION_ID


class MessageTypeConflict(InvalidArgument):
    code = MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


class MessageBodyEmpty(InvalidArgument):
    code = MESSAGE_BODY_EMPTY


class ClientIdRequired(InvalidArgument):
    code = CLIENT_ID_REQUIRED


class UnrecognizedClientType(InvalidArgument):
    code = UNRECOGNIZED_CLIENT_TYPE


class _SizeError(InvalidArgument):
    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size} bytes, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class MessageTooLarge(_SizeError):
    code = MESSAGE_BODY_TOO_LARGE


class PropertiesTooLarge(_SizeError):
    code = MESSAGE_PROPERTIES_TOO_LARGE


class PayloadTooLarge(_SizeError):
    code = PAYLOAD_TOO_LARGE


class NotFound(TxmqError):
    code = NOT_FOUND


class TopicNotFound(NotFound):
    code = TOPIC_NOT_FOUND


class GroupNotFound(NotFound):
    code = CONSUMER_GROUP_NOT_FOUND


class MessageNotFound(NotFound):
    code = MESSAGE_NOT_FOUND


class OffsetNotFound(NotFound):
    code = OFFSET_NOT_FOUND


class Forbidden(TxmqError):
    code = FORBIDDEN


class Conflict(TxmqError):
    code = PRECONDITION_FAILED


class TooManyRequests(TxmqError):
    code = TOO_MANY_REQUESTS
    retriable = True


class Unsupported(TxmqError):
    code = UNSUPPORTED


class RequestTimeout(TxmqError):
    code = REQUEST_TIMEOUT
    retriable = True


class SendTimeout(RequestTimeout):
    """Back-pressure: the producer's bounded in-flight window had no room within the send timeout."""


class ClientClosed(TxmqError):
    """The SDK client was shut down or not started; start a new one."""


class StorageError(TxmqError):
    code = INTERNAL_ERROR


class StoreFenced(StorageError):
    """A write or fsync failed earlier; the store refuses every write until it is restarted."""


class DiskFull(StorageError):
    pass


class CorruptRecord(StorageError):
    code = MESSAGE_CORRUPTED

    def __init__(self, message: str, *, offset: int = -1) -> None:
        super().__init__(message)
        self.offset = offset


class ProtocolError(TxmqError):
    code = BAD_REQUEST


class ConnectionError_(TxmqError):
    code = INTERNAL_SERVER_ERROR
    retriable = True


_BY_CODE: dict[int, type[TxmqError]] = {}
for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, TxmqError) and _cls.__name__[0] != "_":
        _BY_CODE.setdefault(_cls.code, _cls)
_BY_CODE[INTERNAL_ERROR] = TxmqError
_BY_CODE[INTERNAL_SERVER_ERROR] = TxmqError


def for_code(code: int) -> type[TxmqError]:
    """The most specific error class for a v2 status code (``TxmqError`` when unknown)."""
    return _BY_CODE.get(code, TxmqError)
