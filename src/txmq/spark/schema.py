"""The source's fixed schema, as plain data (no pyspark import), and a message's row in that order.

One row per committed message. Timestamps are epoch milliseconds on the wire and become Spark
``TIMESTAMP`` values (UTC instants); ``delivery_timestamp`` is null unless the message was delayed to a
time, ``transaction_id`` null unless it was transactional, ``keys`` the space-separated RocketMQ keys.
"""

from __future__ import annotations

from typing import Final

# (column, Spark SQL type); the order is the row order.
COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("topic", "string"),
    ("queue_id", "int"),
    ("queue_offset", "bigint"),
    ("message_id", "string"),
    ("tags", "string"),
    ("keys", "string"),
    ("body", "binary"),
    ("properties", "map<string,string>"),
    ("born_timestamp", "timestamp"),
    ("store_timestamp", "timestamp"),
    ("delivery_timestamp", "timestamp"),
    ("message_group", "string"),
    ("transaction_id", "string"),
)
NAMES: Final = tuple(name for name, _ in COLUMNS)
DDL: Final = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
NOT_NULL: Final = frozenset({"topic", "queue_id", "queue_offset", "message_id", "body"})
