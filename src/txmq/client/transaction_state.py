"""What a producer's local transaction reports to the broker, and the listener a transactional producer uses.

Names follow RocketMQ's client API (``LocalTransactionState.UNKNOW`` keeps its historical spelling;
``UNKNOWN`` is the same member) so code ported from the Java or 4.x Python clients reads the same.
"""

from __future__ import annotations

import enum
from typing import Any, Protocol, runtime_checkable


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    # An alias of UNKNOW: ``LocalTransactionState.UNKNOWN is LocalTransactionState.UNKNOW``.
    UNKNOWN = "UNKNOW"  # noqa: PIE796


@runtime_checkable
class TransactionListener(Protocol):
    """The producer's side of a transactional message.

    ``execute_local_transaction`` runs right after the half message was stored; ``msg`` carries the
    transaction id (``msg.transaction_id``) so the local transaction can record it.
    ``check_local_transaction`` answers the broker's check-back for a half message whose outcome it
    never heard (``msg`` is the half message as stored: ``transaction_id``, ``born_timestamp_ms``, ...).
    Returning ``UNKNOW`` means "ask again later".
    """

    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: Any) -> LocalTransactionState: ...
