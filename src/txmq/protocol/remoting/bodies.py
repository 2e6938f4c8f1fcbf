"""JSON bodies of remoting commands, in the shapes fastjson (Java) reads and writes.

Two fastjson habits matter on the wire:

* Maps with integer keys are written with **bare** keys (``{0:"10.0.0.1:10911"}``), which is not
  JSON. Real clients expect exactly that in ``TopicRouteData.brokerDatas[].brokerAddrs``, so
  ``dumps_fastjson`` writes integer keys bare; ``loads_lenient`` reads bodies *from* clients and
  name servers that do the same (it quotes bare integer keys outside strings, then parses).
* Unknown fields are ignored and missing ones take Java's defaults; a field of the wrong JSON type
  raises ``InvalidBody``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from txmq.protocol.remoting.codes import PERM_READ_WRITE
from txmq.protocol.remoting.errors import InvalidBody

_BARE_KEY: Final = re.compile(r'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(?=\s*:)')
_json_str = json.JSONEncoder().encode
_loads = json.JSONDecoder().decode


def dumps_fastjson(value: Any) -> bytes:
    """Serialize like fastjson: compact, integer map keys bare, everything else standard JSON."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts).encode("utf-8")


def _write(value: Any, out: list[str]) -> None:
    if isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(str(key) if type(key) is int else _json_str(str(key)))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        out.append(_json_str(value))


def loads_lenient(data: bytes) -> Any:
    """Parse a JSON body that may hold fastjson's bare integer keys; raises ``InvalidBody``."""
    try:
        text = data.decode("utf-8")
        try:
            return _loads(text)
        except ValueError:
            return _loads(_BARE_KEY.sub(_quote_key, text))
    except (ValueError, RecursionError) as exc:
        raise InvalidBody(f"body is not JSON: {exc}") from None


def _quote_key(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return match.group(1)
    return f'{match.group(2)}"{match.group(3)}"'


def _object(data: bytes | Mapping[str, Any]) -> Mapping[str, Any]:
    obj = loads_lenient(data) if isinstance(data, bytes | bytearray) else data
    if not isinstance(obj, Mapping):
        raise InvalidBody("body is not a JSON object")
    return obj


def _get(obj: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = obj.get(key)
    if value is None:
        return default
    if kind is int and type(value) is str and value.lstrip("-").isdecimal():
        return int(value)  # fastjson sometimes quotes longs
    if not isinstance(value, kind) or (kind is int and type(value) is bool):
        raise InvalidBody(f"field {key!r} should be {kind.__name__}, got {type(value).__name__}")
    return value


def _objects(obj: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items: list[Mapping[str, Any]] = _get(obj, key, list, [])
    if not all(isinstance(item, Mapping) for item in items):
        raise InvalidBody(f"field {key!r} should be a list of objects")
    return items


def _strings(obj: Mapping[str, Any], key: str) -> list[str]:
    items: list[str] = _get(obj, key, list, [])
    if not all(type(item) is str for item in items):
        raise InvalidBody(f"field {key!r} should be a list of strings")
    return items


# ---------------------------------------------------------------------------------------------- heartbeat


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = "*"
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode, "topic": self.topic, "subString": self.sub_string,
            "tagsSet": self.tags_set, "codeSet": self.code_set, "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> SubscriptionData:
        codes = _get(obj, "codeSet", list, [])
        if not all(type(c) is int for c in codes):
            raise InvalidBody("field 'codeSet' should be a list of integers")
        return cls(
            topic=_get(obj, "topic", str, ""), sub_string=_get(obj, "subString", str, "*"),
            tags_set=_strings(obj, "tagsSet"), code_set=codes, sub_version=_get(obj, "subVersion", int, 0),
            expression_type=_get(obj, "expressionType", str, "TAG"),
            class_filter_mode=_get(obj, "classFilterMode", bool, False),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConsumerData:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"  # push; CONSUME_ACTIVELY = pull, CONSUME_POP
    message_model: str = "CLUSTERING"  # or BROADCASTING
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name, "consumeType": self.consume_type,
            "messageModel": self.message_model, "consumeFromWhere": self.consume_from_where,
            "subscriptionDataSet": [s.to_dict() for s in self.subscriptions], "unitMode": self.unit_mode,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> ConsumerData:
        return cls(
            group_name=_get(obj, "groupName", str, ""),
            consume_type=_get(obj, "consumeType", str, "CONSUME_PASSIVELY"),
            message_model=_get(obj, "messageModel", str, "CLUSTERING"),
            consume_from_where=_get(obj, "consumeFromWhere", str, "CONSUME_FROM_LAST_OFFSET"),
            subscriptions=[SubscriptionData.from_dict(s) for s in _objects(obj, "subscriptionDataSet")],
            unit_mode=_get(obj, "unitMode", bool, False),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatData:
    """HEART_BEAT (34) body: who this client is and which groups it produces and consumes for."""

    client_id: str
    producer_groups: list[str] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    def to_json(self) -> bytes:
        return dumps_fastjson(
            {
                "clientID": self.client_id,
                "producerDataSet": [{"groupName": g} for g in self.producer_groups],
                "consumerDataSet": [c.to_dict() for c in self.consumers],
            }
        )

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> HeartbeatData:
        obj = _object(data)
        return cls(
            client_id=_get(obj, "clientID", str, ""),
            producer_groups=[_get(p, "groupName", str, "") for p in _objects(obj, "producerDataSet")],
            consumers=[ConsumerData.from_dict(c) for c in _objects(obj, "consumerDataSet")],
        )


# ---------------------------------------------------------------------------------------------- routes


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)  # broker id (0 = master) -> "ip:port"

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerAddrs": self.broker_addrs}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> BrokerData:
        addrs = _get(obj, "brokerAddrs", Mapping, {})
        try:
            parsed = {int(k): v for k, v in addrs.items() if type(v) is str}
        except ValueError:
            raise InvalidBody("brokerAddrs keys must be broker ids") from None
        return cls(_get(obj, "cluster", str, ""), _get(obj, "brokerName", str, ""), parsed)


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ_WRITE
    topic_sys_flag: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name, "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums, "perm": self.perm, "topicSysFlag": self.topic_sys_flag,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> QueueData:
        return cls(
            broker_name=_get(obj, "brokerName", str, ""), read_queue_nums=_get(obj, "readQueueNums", int, 0),
            write_queue_nums=_get(obj, "writeQueueNums", int, 0), perm=_get(obj, "perm", int, 0),
            topic_sys_flag=_get(obj, "topicSysFlag", int, 0),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC (105) answer; ``to_json`` writes brokerAddrs keys bare, like the name server."""

    broker_datas: list[BrokerData]
    queue_datas: list[QueueData]
    order_topic_conf: str | None = None

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "brokerDatas": [b.to_dict() for b in self.broker_datas],
            "filterServerTable": {},
            "queueDatas": [q.to_dict() for q in self.queue_datas],
        }
        if self.order_topic_conf is not None:
            obj["orderTopicConf"] = self.order_topic_conf
        return dumps_fastjson(obj)

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> TopicRouteData:
        obj = _object(data)
        return cls(
            broker_datas=[BrokerData.from_dict(b) for b in _objects(obj, "brokerDatas")],
            queue_datas=[QueueData.from_dict(q) for q in _objects(obj, "queueDatas")],
            order_topic_conf=_get(obj, "orderTopicConf", str, None),
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO (106) answer."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]

    def to_json(self) -> bytes:
        return dumps_fastjson(
            {
                "brokerAddrTable": {name: b.to_dict() for name, b in self.broker_addr_table.items()},
                "clusterAddrTable": self.cluster_addr_table,
            }
        )

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> ClusterInfo:
        obj = _object(data)
        brokers = _get(obj, "brokerAddrTable", Mapping, {})
        clusters = _get(obj, "clusterAddrTable", Mapping, {})
        return cls(
            {name: BrokerData.from_dict(_object(b)) for name, b in brokers.items()},
            {name: _strings(clusters, name) for name in clusters},
        )


@dataclass(frozen=True, slots=True)
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) / GET_TOPICS_BY_CLUSTER answer."""

    topic_list: list[str]
    broker_addr: str | None = None

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {"topicList": self.topic_list}
        if self.broker_addr is not None:
            obj["brokerAddr"] = self.broker_addr
        return dumps_fastjson(obj)

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> TopicList:
        obj = _object(data)
        return cls(_strings(obj, "topicList"), _get(obj, "brokerAddr", str, None))


# ------------------------------------------------------------------------------------ broker registration


@dataclass(frozen=True, slots=True)
class TopicConfigData:
    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums, "perm": self.perm,
            "topicFilterType": self.topic_filter_type, "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> TopicConfigData:
        return cls(
            topic_name=_get(obj, "topicName", str, ""), read_queue_nums=_get(obj, "readQueueNums", int, 0),
            write_queue_nums=_get(obj, "writeQueueNums", int, 0), perm=_get(obj, "perm", int, 0),
            topic_filter_type=_get(obj, "topicFilterType", str, "SINGLE_TAG"),
            topic_sys_flag=_get(obj, "topicSysFlag", int, 0), order=_get(obj, "order", bool, False),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class TopicConfigWrapper:
    """TopicConfigSerializeWrapper: every topic of a broker plus its data version.

    GET_ALL_TOPIC_CONFIG (21) answers with it; REGISTER_BROKER nests it in ``RegisterBrokerBody``.
    """

    topic_config_table: dict[str, TopicConfigData]
    data_version_timestamp: int = 0
    data_version_counter: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "topicConfigTable": {name: t.to_dict() for name, t in self.topic_config_table.items()},
            "dataVersion": {"timestamp": self.data_version_timestamp, "counter": self.data_version_counter},
        }

    def to_json(self) -> bytes:
        return dumps_fastjson(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> TopicConfigWrapper:
        obj = _object(data)
        table = _get(obj, "topicConfigTable", Mapping, {})
        version = _get(obj, "dataVersion", Mapping, {})
        return cls(
            {name: TopicConfigData.from_dict(_object(t)) for name, t in table.items()},
            _get(version, "timestamp", int, 0),
            _get(version, "counter", int, 0),
        )


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """REGISTER_BROKER (103) body, uncompressed JSON form (header ``compressed=false``)."""

    topics: TopicConfigWrapper
    filter_server_list: list[str] = field(default_factory=list)

    def to_json(self) -> bytes:
        return dumps_fastjson(
            {
                "topicConfigSerializeWrapper": self.topics.to_dict(),
                "filterServerList": self.filter_server_list,
            }
        )

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> RegisterBrokerBody:
        obj = _object(data)
        wrapper = _get(obj, "topicConfigSerializeWrapper", Mapping, {})
        return cls(TopicConfigWrapper.from_json(wrapper), _strings(obj, "filterServerList"))


# ---------------------------------------------------------------------------------------------- consumers


@dataclass(frozen=True, slots=True)
class ConsumerListBody:
    """GET_CONSUMER_LIST_BY_GROUP (38) answer."""

    consumer_id_list: list[str]

    def to_json(self) -> bytes:
        return dumps_fastjson({"consumerIdList": self.consumer_id_list})

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> ConsumerListBody:
        return cls(_strings(_object(data), "consumerIdList"))


@dataclass(frozen=True, slots=True)
class MessageQueueData:
    topic: str
    broker_name: str
    queue_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> MessageQueueData:
        return cls(
            _get(obj, "topic", str, ""), _get(obj, "brokerName", str, ""), _get(obj, "queueId", int, 0)
        )


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody:
    """LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) request body (the same fields)."""

    consumer_group: str
    client_id: str
    mq_set: list[MessageQueueData]
    only_this_broker: bool = False

    def to_json(self) -> bytes:
        return dumps_fastjson(
            {
                "consumerGroup": self.consumer_group, "clientId": self.client_id,
                "mqSet": [mq.to_dict() for mq in self.mq_set], "onlyThisBroker": self.only_this_broker,
            }
        )  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> LockBatchRequestBody:
        obj = _object(data)
        return cls(
            consumer_group=_get(obj, "consumerGroup", str, ""), client_id=_get(obj, "clientId", str, ""),
            mq_set=[MessageQueueData.from_dict(mq) for mq in _objects(obj, "mqSet")],
            only_this_broker=_get(obj, "onlyThisBroker", bool, False),
        )  # fmt: skip


UnlockBatchRequestBody = LockBatchRequestBody


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody:
    """LOCK_BATCH_MQ answer: the queues this client now holds locked."""

    lock_ok_mq_set: list[MessageQueueData]

    def to_json(self) -> bytes:
        return dumps_fastjson({"lockOKMQSet": [mq.to_dict() for mq in self.lock_ok_mq_set]})

    @classmethod
    def from_json(cls, data: bytes | Mapping[str, Any]) -> LockBatchResponseBody:
        return cls([MessageQueueData.from_dict(mq) for mq in _objects(_object(data), "lockOKMQSet")])
