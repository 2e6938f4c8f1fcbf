"""JSON bodies: fastjson bare integer keys out, lenient parsing in, round trips, type errors."""

from __future__ import annotations

import json

import pytest

from txmq.protocol.remoting import bodies as b
from txmq.protocol.remoting.errors import InvalidBody

Body = (
    b.HeartbeatData | b.TopicRouteData | b.ClusterInfo | b.TopicList | b.ConsumerListBody
    | b.LockBatchRequestBody | b.LockBatchResponseBody | b.RegisterBrokerBody | b.TopicConfigWrapper
)  # fmt: skip


def test_route_data_has_bare_integer_keys_like_the_name_server() -> None:
    route = b.TopicRouteData(
        [b.BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})],
        [b.QueueData("broker-a", 4, 4)],
    )
    text = route.to_json()
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in text
    assert b'"perm":6' in text
    assert b'"filterServerTable":{}' in text
    with pytest.raises(ValueError):
        json.loads(text)  # exactly as invalid as the real thing
    assert b.TopicRouteData.from_json(text) == route
    quoted = text.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
    assert b.TopicRouteData.from_json(quoted) == route


def test_lenient_parser_leaves_strings_alone() -> None:
    data = b'{"s":"{1:2}, 3:\\"4:","n":{-5:{6:[7]}}}'
    assert b.loads_lenient(data) == {"s": '{1:2}, 3:"4:', "n": {"-5": {"6": [7]}}}
    for bad in (b"{", b"\xff", b"[" * 100_000, b"{1 2}"):
        with pytest.raises(InvalidBody):
            b.loads_lenient(bad)


def test_heartbeat_from_ali_ons_shape() -> None:
    raw = json.dumps(
        {
            "clientID": "10.0.0.9@1234",
            "producerDataSet": [{"groupName": "PID"}, {"groupName": "CLIENT_INNER_PRODUCER"}],
            "consumerDataSet": [
                {
                    "groupName": "GID", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                    "subscriptionDataSet": [
                        {"topic": "T", "subString": "TagA || TagB", "tagsSet": ["TagA", "TagB"],
                         "codeSet": [1, 2], "subVersion": 1700000000000, "expressionType": "TAG",
                         "classFilterMode": False, "filterClassSource": None},
                    ],
                }
            ],
            "somethingNew": 1,
        }
    ).encode()  # fmt: skip
    hb = b.HeartbeatData.from_json(raw)
    assert hb.client_id == "10.0.0.9@1234"
    assert hb.producer_groups == ["PID", "CLIENT_INNER_PRODUCER"]
    (consumer,) = hb.consumers
    assert consumer.subscriptions[0].tags_set == ["TagA", "TagB"]
    assert consumer.subscriptions[0].sub_version == 1700000000000
    assert b.HeartbeatData.from_json(hb.to_json()) == hb


BODIES: list[Body] = [
    b.HeartbeatData("c", ["p"], [b.ConsumerData("g", subscriptions=[b.SubscriptionData("t")])]),
    b.TopicRouteData([], [], order_topic_conf="broker-a:4"),
    b.ClusterInfo({"broker-a": b.BrokerData("C", "broker-a", {0: "a:1"})}, {"C": ["broker-a"]}),
    b.TopicList(["a", "b"], "1.2.3.4:10911"),
    b.ConsumerListBody(["c1", "c2"]),
    b.LockBatchRequestBody("g", "c", [b.MessageQueueData("t", "broker-a", 3)], True),
    b.LockBatchResponseBody([b.MessageQueueData("t", "broker-a", 3)]),
    b.RegisterBrokerBody(b.TopicConfigWrapper({"t": b.TopicConfigData("t", 8, 8)}, 5, 6), ["f"]),
    b.TopicConfigWrapper({"t": b.TopicConfigData("t", order=True)}),
]  # fmt: skip


@pytest.mark.parametrize("body", BODIES, ids=[type(x).__name__ for x in BODIES])
def test_round_trip(body: Body) -> None:
    assert type(body).from_json(body.to_json()) == body


def test_wrong_types_are_invalid_body() -> None:
    for raw in (
        b"[]",
        b'{"consumerIdList":"x"}',
        b'{"consumerIdList":[1]}',
    ):
        with pytest.raises(InvalidBody):
            b.ConsumerListBody.from_json(raw)
    with pytest.raises(InvalidBody):
        b.QueueData.from_dict({"readQueueNums": True})
    with pytest.raises(InvalidBody):
        b.BrokerData.from_dict({"brokerAddrs": {"master": "a:1"}})
    assert b.QueueData.from_dict({"readQueueNums": "8"}).read_queue_nums == 8  # quoted longs are fine
