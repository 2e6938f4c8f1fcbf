"""TransactionProducer over remoting: commit, rollback, UNKNOW resolved by check-back, context manager."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.client.broker import BrokerProcess
from tests.client.helpers import wait_until
from tests.client.test_producer import read_all
from txmq.client import LocalTransactionState, Message, MessageView, TransactionProducer
from txmq.client._remoting import RemotingTransport
from txmq.client._transaction import half_view
from txmq.common import errors


class Listener:
    """Executes with the state given as ``arg``; answers checks from ``decisions`` (default COMMIT)."""

    def __init__(self) -> None:
        self.executed: list[str] = []
        self.checked: list[str] = []
        self.decisions: dict[str, LocalTransactionState] = {}
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: MessageView, arg: Any) -> LocalTransactionState:
        assert msg.transaction_id
        with self.lock:
            self.executed.append(msg.transaction_id)
        if isinstance(arg, Exception):
            raise arg
        return arg  # type: ignore[no-any-return]

    def check_local_transaction(self, msg: MessageView) -> LocalTransactionState:
        assert msg.transaction_id
        with self.lock:
            self.checked.append(msg.transaction_id)
        return self.decisions.get(msg.body.decode(), LocalTransactionState.COMMIT_MESSAGE)


async def test_commit_rollback_and_unknown(broker: BrokerProcess, unique: str) -> None:
    listener = Listener()
    listener.decisions["unknown-then-rollback"] = LocalTransactionState.ROLLBACK_MESSAGE
    async with TransactionProducer(f"pg{unique}", listener, broker.namesrv) as producer:
        cases = {
            "commit": LocalTransactionState.COMMIT_MESSAGE,
            "rollback": LocalTransactionState.ROLLBACK_MESSAGE,
            "unknown-then-commit": LocalTransactionState.UNKNOW,
            "unknown-then-rollback": LocalTransactionState.UNKNOWN,
            "raises-then-commit": RuntimeError("local transaction crashed"),
        }
        halves = {}
        for body, arg in cases.items():
            half, state = await producer.send_message_in_transaction(Message(unique, body.encode()), arg)
            halves[body] = half
            assert half.transaction_id
            assert state is (arg if isinstance(arg, LocalTransactionState) else LocalTransactionState.UNKNOW)
        await wait_until(lambda: len(set(listener.checked)) >= 3, what="three check-backs answered")
        got = await read_all(broker, unique, 3)
    assert sorted(m.body for m in got) == [b"commit", b"raises-then-commit", b"unknown-then-commit"]
    assert halves["rollback"].transaction_id not in listener.checked
    assert halves["commit"].transaction_id not in listener.checked
    assert len(listener.executed) == 5


class AsyncListener(Listener):
    """``Listener`` with ``async def`` methods: awaited on the loop (no worker thread), the first call
    through ``_run``, the next ones in ``_execute`` itself once known to be a coroutine function."""

    async def execute_local_transaction(  # type: ignore[override]
        self, msg: MessageView, arg: Any
    ) -> LocalTransactionState:
        assert threading.current_thread() is threading.main_thread()
        return Listener.execute_local_transaction(self, msg, arg)

    async def check_local_transaction(self, msg: MessageView) -> LocalTransactionState:  # type: ignore[override]
        assert threading.current_thread() is threading.main_thread()
        return Listener.check_local_transaction(self, msg)


async def test_an_async_listener_commits_rolls_back_and_is_checked(
    broker: BrokerProcess, unique: str
) -> None:
    listener = AsyncListener()
    async with TransactionProducer(f"pg{unique}", listener, broker.namesrv) as producer:
        cases = [
            ("commit-1", LocalTransactionState.COMMIT_MESSAGE),
            ("rollback", LocalTransactionState.ROLLBACK_MESSAGE),
            ("raises-then-commit", RuntimeError("local transaction crashed")),
            ("commit-2", LocalTransactionState.COMMIT_MESSAGE),
            ("not-a-state-then-commit", "COMMIT"),
        ]
        for body, arg in cases:
            half, state = await producer.send_message_in_transaction(Message(unique, body.encode()), arg)
            assert half.transaction_id
            assert state is (arg if isinstance(arg, LocalTransactionState) else LocalTransactionState.UNKNOW)
        assert producer._execute_pool.threads == 0  # never a worker thread
        await wait_until(lambda: len(set(listener.checked)) >= 2, what="two check-backs answered")
        got = await read_all(broker, unique, 4)
    assert sorted(m.body for m in got) == [
        b"commit-1",
        b"commit-2",
        b"not-a-state-then-commit",
        b"raises-then-commit",
    ]
    assert len(listener.executed) == 5


async def test_context_manager_commits_or_rolls_back(broker: BrokerProcess, unique: str) -> None:
    listener = Listener()
    async with TransactionProducer(f"pg{unique}", listener, broker.namesrv) as producer:
        async with producer.transaction(Message(unique, b"clean exit")) as tx:
            assert tx.transaction_id
        assert tx.state is LocalTransactionState.COMMIT_MESSAGE
        with pytest.raises(ZeroDivisionError):
            async with producer.transaction(Message(unique, b"raised")) as tx2:
                1 / 0  # noqa: B018
        assert tx2.state is LocalTransactionState.ROLLBACK_MESSAGE
        async with producer.transaction(Message(unique, b"left unknown")) as tx3:
            tx3.leave_unknown()
        await wait_until(lambda: tx3.transaction_id in listener.checked, what="check-back of the unknown one")
        got = await read_all(broker, unique, 2)
    assert sorted(m.body for m in got) == [b"clean exit", b"left unknown"]


async def test_transaction_with_batch_is_rejected(broker: BrokerProcess, unique: str) -> None:
    async with TransactionProducer(f"pg{unique}", Listener(), broker.namesrv) as producer:
        with pytest.raises(errors.InvalidArgument):
            await producer.send_batch([Message(unique, b"a", transactional=True)])


async def test_async_listener_and_table_listener_get_the_transaction_id(
    broker: BrokerProcess, unique: str, tmp_path: Any
) -> None:
    import sqlalchemy as sa

    from txmq.client.txtable import TableBackedListener, TransactionTable

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'tx.db'}")
    table = TransactionTable(engine, grace_period_s=0.0)
    table.create_schema()
    done: list[str] = []
    listener = TableBackedListener(table, lambda session, msg, arg: done.append(msg.transaction_id))
    async with TransactionProducer(f"pg{unique}", listener, broker.namesrv) as producer:
        half, state = await producer.send_message_in_transaction(Message(unique, b"debit"), None)
    assert state is LocalTransactionState.COMMIT_MESSAGE
    assert done == [half.transaction_id]
    assert table.lookup(half.transaction_id or "") == "C"
    engine.dispose()


async def test_cancelled_while_the_local_transaction_runs_leaves_it_to_check_back(
    broker: BrokerProcess, unique: str
) -> None:
    """The blocking listener runs in the pool; a caller cancelled meanwhile gets CancelledError, no
    decision is sent (whatever the listener returns later), and the check-back settles the half."""
    import asyncio

    started, release = threading.Event(), threading.Event()

    class Slow(Listener):
        def execute_local_transaction(self, msg: MessageView, arg: Any) -> LocalTransactionState:
            if msg.body == b"slow":
                started.set()
                release.wait(30)
            return super().execute_local_transaction(msg, arg)

    listener = Slow()
    async with TransactionProducer(f"pg{unique}", listener, broker.namesrv) as producer:
        # a first transaction: the route and the connection are then known (the in-place paths)
        await producer.send_message_in_transaction(
            Message(unique, b"first"), LocalTransactionState.COMMIT_MESSAGE
        )
        task = asyncio.ensure_future(
            producer.send_message_in_transaction(
                Message(unique, b"slow"), LocalTransactionState.ROLLBACK_MESSAGE
            )
        )
        await wait_until(started.is_set, what="the slow local transaction started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()  # the listener answers ROLLBACK now: nobody sends it
        await wait_until(lambda: len(listener.checked) >= 1, what="the check-back of the cancelled one")
        got = await read_all(broker, unique, 2)
    assert sorted(m.body for m in got) == [b"first", b"slow"]  # the check-back answered COMMIT


def test_transactional_copy_keeps_every_field() -> None:
    """``_transactional`` spells Message's fields out: a field added to Message must be carried too."""
    import dataclasses

    from txmq.client._transaction import _transactional

    values: dict[str, Any] = {
        "topic": "t", "body": b"x", "tags": "a", "keys": ("k",), "properties": {"p": "q"},
        "message_group": None, "delivery_timestamp_ms": 123, "delay_level": 3, "message_id": "id",
        "transactional": False, "check_immunity_s": 5,
    }  # fmt: skip
    assert {f.name for f in dataclasses.fields(Message)} == set(values)  # a new field: add it above
    message = Message(**values)
    assert _transactional(message) == dataclasses.replace(message, transactional=True)


async def test_remoting_half_is_started_in_place_and_awaited_on_the_channels_future(
    broker: BrokerProcess, unique: str
) -> None:
    """Over remoting the half's first attempt hands back the channel's response future (no done
    callback, no second future); its result is the half's SendResult, transaction id included, and a
    transaction sent that way commits as any other."""
    async with TransactionProducer(f"pg{unique}", Listener(), broker.namesrv) as producer:
        committed, state = await producer.send_message_in_transaction(
            Message(unique, b"in-place"), LocalTransactionState.COMMIT_MESSAGE
        )  # the first opens the broker's connection (before it, start_send_request declines: None)
        assert committed.transaction_id and state is LocalTransactionState.COMMIT_MESSAGE
        transport = producer.transport
        assert isinstance(transport, RemotingTransport)
        [mq, *_] = await transport.route(unique, for_write=True)
        message = Message(unique, b"direct", transactional=True)
        started = transport.start_send_request(mq, message, producer_group=producer.group, timeout_s=3)
        assert started is not None
        future, message_id = started
        half = transport.send_result(mq, message_id, await future)
        assert half.message_id == message_id and half.transaction_id and half.queue == mq
        await producer.end(half, half_view(message, half), LocalTransactionState.COMMIT_MESSAGE)
        got = await read_all(broker, unique, 2)
    assert sorted(m.body for m in got) == [b"direct", b"in-place"]
