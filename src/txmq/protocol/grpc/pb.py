"""The one place that imports the generated ``apache.rocketmq.v2`` classes.

They come from the official Apache package ``rocketmq-python-client`` (pinned in pyproject), module
``rocketmq.grpc_protocol``. Importing that package normally runs ``rocketmq/__init__.py``, which loads
the whole client and creates ``$HOME/logs/rocketmq_python`` and configures logging: a broker must not do
that. So the three generated modules are loaded under their real names with the two parent packages
stubbed for the duration of the load only. A later ``import rocketmq`` (a test driving the official
client in the same process) still runs the real package and reuses these modules from ``sys.modules``
(re-executing them would register the descriptors twice).

Everything here is typed ``Any``: the generated code has no stubs.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any

_PREFIX = "rocketmq.grpc_protocol."
_NAMES = ("definition_pb2", "service_pb2", "service_pb2_grpc")


def _load() -> tuple[Any, Any, Any]:
    if all(_PREFIX + name in sys.modules for name in _NAMES):
        return tuple(sys.modules[_PREFIX + name] for name in _NAMES)  # type: ignore[return-value]
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the generated gRPC classes need rocketmq-python-client==5.1.2 (pip install it)")
    root = list(spec.submodule_search_locations)
    created: list[str] = []
    for name, path in (
        ("rocketmq", root),
        ("rocketmq.grpc_protocol", [os.path.join(root[0], "grpc_protocol")]),
    ):
        if name not in sys.modules:
            stub = types.ModuleType(name)
            stub.__path__ = path
            sys.modules[name] = stub
            created.append(name)
    try:
        loaded = tuple(importlib.import_module(_PREFIX + name) for name in _NAMES)
    finally:
        for name in reversed(created):
            del sys.modules[name]
    return loaded  # type: ignore[return-value]


definition, service, service_grpc = _load()

# Messages and enums other modules use (re-exported so nothing else touches the generated modules).
Message: Any = definition.Message
SystemProperties: Any = definition.SystemProperties
Resource: Any = definition.Resource
Status: Any = definition.Status
Code: Any = definition.Code
Digest: Any = definition.Digest
DigestType: Any = definition.DigestType
Encoding: Any = definition.Encoding
MessageType: Any = definition.MessageType
MessageQueue: Any = definition.MessageQueue
Broker: Any = definition.Broker
Endpoints: Any = definition.Endpoints
Address: Any = definition.Address
AddressScheme: Any = definition.AddressScheme
Permission: Any = definition.Permission
ClientType: Any = definition.ClientType
FilterType: Any = definition.FilterType
Settings: Any = definition.Settings
Publishing: Any = definition.Publishing
Subscription: Any = definition.Subscription
RetryPolicy: Any = definition.RetryPolicy
ExponentialBackoff: Any = definition.ExponentialBackoff
FilterExpression: Any = definition.FilterExpression
TransactionResolution: Any = definition.TransactionResolution
TransactionSource: Any = definition.TransactionSource
Assignment: Any = definition.Assignment
DeadLetterQueue: Any = definition.DeadLetterQueue
QueryOffsetPolicy: Any = definition.QueryOffsetPolicy

MessagingServiceServicer: Any = service_grpc.MessagingServiceServicer
MessagingServiceStub: Any = service_grpc.MessagingServiceStub
add_MessagingServiceServicer_to_server: Any = service_grpc.add_MessagingServiceServicer_to_server

# Request / response classes are looked up by name: ``pb.service.SendMessageResponse``.
