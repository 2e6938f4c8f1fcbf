"""State the remoting front door keeps beside the broker: who is connected on which connection, the
consumer groups' members and subscriptions (4.x rebalancing asks for them), queue locks, and the
``ClientChannel`` that lets the broker call a producer back on its own connection."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from txmq.broker.broker import Broker
from txmq.broker.clients import ClientKind
from txmq.broker.locks import QueueLocks
from txmq.common.message import MessageView
from txmq.protocol.remoting.codes import RequestCode
from txmq.protocol.remoting.headers import CheckTransactionStateRequestHeader
from txmq.protocol.remoting.message_codec import encode_message
from txmq.server.remoting.convert import check_wire
from txmq.server.remoting_transport import RemotingEndpoint

log = logging.getLogger(__name__)

_CLIENT_IDS = "client_ids"
CONSUMER_EXPIRY_MS = 120_000


class RemotingChannel:
    """A client's remoting connection as the broker's ``ClientChannel`` (transaction check-back)."""

    def __init__(self, endpoint: RemotingEndpoint, producer_group: str) -> None:
        self._endpoint = endpoint
        self._producer_group = producer_group

    def is_open(self) -> bool:
        return self._endpoint.is_open()

    def send_check(self, message: MessageView, transaction_id: str) -> bool:
        """A oneway CHECK_TRANSACTION_STATE with the half message; True if written to an open connection."""
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=message.queue_offset,
            commit_log_offset=message.commit_log_offset,
            topic=message.topic,
            msg_id=message.message_id,
            transaction_id=transaction_id,
            offset_msg_id=transaction_id,
        )
        wire = check_wire(message, transaction_id, self._producer_group)
        return self._endpoint.oneway(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), encode_message(wire)
        )


@dataclass(slots=True)
class GroupMembers:
    """The live members of one consumer group and what they subscribed (topic -> expression)."""

    last_seen_ms: dict[str, int] = field(default_factory=dict)
    subscriptions: dict[str, str] = field(default_factory=dict)


class RemotingContext:
    def __init__(self, broker: Broker, advertised_addr: str) -> None:
        self.broker = broker
        self.advertised_addr = advertised_addr  # "ip:port" of this remoting door, for routes
        self.locks = QueueLocks(broker.clock)
        self.groups: dict[str, GroupMembers] = {}

    # ---- connections and clients --------------------------------------------------------------
    def bind_client(self, endpoint: RemotingEndpoint, client_id: str) -> None:
        ids = endpoint.attachments.get(_CLIENT_IDS)
        if not isinstance(ids, set):
            ids = set()
            endpoint.attachments[_CLIENT_IDS] = ids
            endpoint.add_close_callback(self._connection_closed)
        ids.add(client_id)

    def _connection_closed(self, endpoint: RemotingEndpoint) -> None:
        ids = endpoint.attachments.get(_CLIENT_IDS)
        for client_id in ids if isinstance(ids, set) else ():
            self.forget_client(client_id)

    def forget_client(self, client_id: str, *, consumer_group: str | None = None) -> None:
        for name, members in list(self.groups.items()):
            if consumer_group is None or name == consumer_group:
                members.last_seen_ms.pop(client_id, None)
        self.locks.release_client(client_id)
        info = self.broker.clients.get(client_id)
        if info is not None and info.protocol == "remoting" and consumer_group is None:
            self.broker.clients.remove(client_id)

    def register_producer(self, endpoint: RemotingEndpoint, client_id: str, groups: set[str]) -> None:
        channel = RemotingChannel(endpoint, next(iter(sorted(groups)), ""))
        self.broker.clients.touch(
            client_id, kind=ClientKind.PRODUCER, groups=groups, channel=channel, protocol="remoting"
        )

    def register_consumer(self, client_id: str, group: str, subscriptions: dict[str, str]) -> None:
        members = self.groups.setdefault(group, GroupMembers())
        members.last_seen_ms[client_id] = self.broker.clock.now_ms()
        members.subscriptions.update(subscriptions)
        info = self.broker.clients.get(client_id)
        if info is None or info.kind is not ClientKind.PRODUCER:
            self.broker.clients.touch(
                client_id, kind=ClientKind.PULL_CONSUMER, groups={group}, topics=set(subscriptions),
                protocol="remoting",
            )  # fmt: skip

    def consumers_of(self, group: str) -> list[str]:
        members = self.groups.get(group)
        if members is None:
            return []
        now = self.broker.clock.now_ms()
        for client_id in [c for c, seen in members.last_seen_ms.items() if now - seen >= CONSUMER_EXPIRY_MS]:
            del members.last_seen_ms[client_id]
        return sorted(members.last_seen_ms)

    def subscription_of(self, group: str, topic: str) -> str | None:
        members = self.groups.get(group)
        return None if members is None else members.subscriptions.get(topic)
