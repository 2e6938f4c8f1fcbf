"""The two services of the transfer demo, each run as its own process so faults can kill it for real.

``python -m txmq.demo.services a ...`` is bank A: it debits and announces each transfer with a
transactional message; the check-back is answered from its transaction table. Injected faults (chosen
per transfer from the seed): the local transaction fails; the decision is "lost" (the producer answers
UNKNOW although it committed); the process dies right after its local commit, before EndTransaction.

``python -m txmq.demo.services b ...`` is bank B: a push consumer that credits each transfer once (a
dedup row in the same database transaction as the credit) and sometimes dies in the middle of a batch.

Both print one line per event on stdout (``DONE 17 COMMIT_MESSAGE``, ``CRASH 18``) for the orchestrator.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from txmq.client import (
    ConsumeFrom,
    ConsumeResult,
    Deduplicator,
    LocalTransactionState,
    Message,
    MessageView,
    PushConsumer,
    TransactionProducer,
)
from txmq.client.txtable import TableBackedListener, TransactionTable
from txmq.common import errors
from txmq.demo import bank

TOPIC = "transfers"
PRODUCER_GROUP = "bank-a"
CONSUMER_GROUP = "bank-b"
CRASH_AFTER_COMMIT = 17
CRASH_MID_BATCH = 18


def transfer_of(seed: int, index: int) -> dict[str, Any]:
    """Transfer ``index`` of a run: the same for every process and restart."""
    rng = random.Random(seed * 1_000_003 + index)
    source = rng.randrange(bank.ACCOUNTS)
    target = (source + 1 + rng.randrange(bank.ACCOUNTS - 1)) % bank.ACCOUNTS
    fault = rng.choices(["none", "fail_local", "drop_end", "crash_after_commit"], weights=[82, 8, 7, 3])[0]
    return {"id": f"t{seed}-{index}", "index": index, "from": source, "to": target,
            "amount": rng.randint(1, 120), "fault": fault}  # fmt: skip


def emit(line: str) -> None:
    print(line, flush=True)


class FaultyBankA(TableBackedListener):
    """Bank A's listener with the demo's producer-side faults."""

    def __init__(self, table: TransactionTable, *, faults: bool) -> None:
        super().__init__(table, self._debit, producer_group=PRODUCER_GROUP)
        self.faults = faults

    def _debit(self, session: Session, msg: Any, arg: Any) -> None:
        if self.faults and arg["fault"] == "fail_local":
            raise RuntimeError(f"injected failure of the local transaction of {arg['id']}")
        bank.debit(session, arg, int(time.time() * 1000))

    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        state = super().execute_local_transaction(msg, arg)
        if self.faults and state is LocalTransactionState.COMMIT_MESSAGE:
            if arg["fault"] == "crash_after_commit":
                emit(f"CRASH {arg['index']} {int(time.time() * 1000)}")
                os._exit(CRASH_AFTER_COMMIT)  # committed locally, EndTransaction never sent
            if arg["fault"] == "drop_end":
                return LocalTransactionState.UNKNOW  # the decision is "lost": check-back must recover it
        return state


async def run_bank_a(args: argparse.Namespace) -> None:
    engine = sa.create_engine(args.db, connect_args=_sqlite_args(args.db))
    table = TransactionTable(engine, grace_period_s=args.grace_s)
    listener = FaultyBankA(table, faults=args.faults)
    async with TransactionProducer(PRODUCER_GROUP, listener, args.endpoints, send_timeout_s=3.0) as producer:
        index = args.start
        while index < args.count:
            transfer = transfer_of(args.seed, index)
            body = json.dumps({k: transfer[k] for k in ("id", "from", "to", "amount")}).encode()
            message = Message(topic=TOPIC, body=body, keys=(transfer["id"],), tags="transfer")
            try:
                _, state = await producer.send_message_in_transaction(message, transfer)
            except errors.TxmqError as exc:  # the broker is restarting: nothing was debited, try again
                emit(f"RETRY {index} {type(exc).__name__}")
                await asyncio.sleep(0.5)
                continue
            emit(f"DONE {index} {state.name}")
            index += 1
        emit("FINISHED")
        await _until_stopped()  # keep answering check-backs for orphans until the orchestrator stops us


async def run_bank_b(args: argparse.Namespace) -> None:
    engine = sa.create_engine(args.db, connect_args=_sqlite_args(args.db))
    dedup = Deduplicator(engine, consumer_group=CONSUMER_GROUP)
    rng = random.Random(args.seed * 7_919 + args.incarnation)

    def on_messages(messages: list[MessageView]) -> ConsumeResult:
        for position, message in enumerate(messages):
            transfer = json.loads(message.body)
            with Session(engine) as session, session.begin():
                if dedup.process_once(session, transfer["id"]):
                    bank.credit(session, transfer, int(time.time() * 1000))
            if args.faults and args.incarnation < args.max_crashes and rng.random() < args.crash_probability:
                # credited, but the batch is not acknowledged: it will be delivered again
                emit(f"CRASH after {position + 1}/{len(messages)} of a batch")
                os._exit(CRASH_MID_BATCH)
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        CONSUMER_GROUP, args.endpoints, listener=on_messages, consume_message_batch_max_size=8,
        consume_threads=1, consume_from=ConsumeFrom.FIRST_OFFSET, rebalance_interval_s=1.0,
    )  # fmt: skip
    consumer.subscribe(TOPIC, "transfer")
    async with consumer:
        emit("CONSUMING")
        await _until_stopped()


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _sqlite_args(url: str) -> dict[str, Any]:
    return {"timeout": 30} if url.startswith("sqlite") else {}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m txmq.demo.services")
    parser.add_argument("service", choices=["a", "b"])
    parser.add_argument("--endpoints", required=True, help="name server host:port")
    parser.add_argument("--db", required=True, help="SQLAlchemy URL of this bank's database")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--grace-s", type=float, default=5.0)
    parser.add_argument("--incarnation", type=int, default=0)
    parser.add_argument("--crash-probability", type=float, default=0.03)
    parser.add_argument("--max-crashes", type=int, default=4, help="bank B dies at most this many times")
    parser.add_argument("--faults", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    runner = run_bank_a if args.service == "a" else run_bank_b
    try:
        asyncio.run(runner(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
