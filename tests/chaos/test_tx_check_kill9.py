"""The check service's progress under kill -9: a broker subprocess holding decided and undecided half
messages is SIGKILLed at random moments (while its check rounds run and save their progress) and
restarted on the same data dir, several times. A half whose decision was durable before the kill is never
checked (before or after any restart), and every undecided half is checked (none is forgotten)."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
from pathlib import Path

from tests.integration.remoting_support import RunningBroker, broker_process, send
from txmq.protocol.remoting.bodies import HeartbeatData
from txmq.protocol.remoting.codes import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    RequestCode,
    ResponseCode,
)
from txmq.protocol.remoting.command import RemotingCommand
from txmq.protocol.remoting.headers import EndTransactionRequestHeader
from txmq.protocol.remoting.message_codec import decode_message
from txmq.server.remoting_transport import RemotingEndpoint, connect

# killed brokers, kept: their output pipes stay with the threads that drain them until the session
# ends (collected here mid-test, their unclosed-pipe warnings upset pytest's unraisable-exception hook)
_KILLED: list[subprocess.Popen[str]] = []
ROUNDS = int(os.environ.get("TXMQ_CHAOS_ROUNDS", "3"))
TX_PROPS = {"TRAN_MSG": "true", "PGROUP": "PGK"}
EXTRA = (
    "--transaction-timeout",
    "400ms",
    "--transaction-check-interval",
    "300ms",
    "--transaction-check-max",
    "1000",
)


async def _producer(broker: RunningBroker, checked: set[str]) -> RemotingEndpoint:
    async def on_request(request: RemotingCommand, _: RemotingEndpoint) -> RemotingCommand | None:
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            checked.add(decode_message(request.body)[0].properties["UNIQ_KEY"])
        return None

    producer = await connect(broker.host, broker.remoting_port, handler=on_request)
    beat = await producer.request(
        RequestCode.HEART_BEAT, body=HeartbeatData("kill9-client", ["PGK"]).to_json()
    )
    assert beat.code == ResponseCode.SUCCESS
    return producer


async def _round(
    broker: RunningBroker,
    rng: random.Random,
    tag: int,
    decided: set[str],
    undecided: set[str],
    checked: set[str],
) -> None:
    """Send halves at a random pace, most decided at once (as a producer does), until the broker is
    killed at a random moment; a decision counts as durable once a later send was acknowledged (its
    fsync covered the decision: one log, appended in order). The decision in flight at the kill is
    neither decided nor undecided: it may be checked or not."""
    producer = await _producer(broker, checked)
    loop = asyncio.get_running_loop()
    killer = loop.call_later(rng.uniform(0.3, 3.0), broker.process.kill)
    in_flight: str | None = None
    try:
        for i in range(10_000):
            key = f"R{tag}-{i}"
            props = {**TX_PROPS, "UNIQ_KEY": key}
            try:
                reply = await asyncio.wait_for(
                    send(producer, "KillTx", key.encode(), props, sys_flag=4, group="PGK"), 5
                )
            except Exception:  # killed: the connection is gone
                break
            assert reply.code == ResponseCode.SUCCESS
            if in_flight is not None:
                decided.add(in_flight)
                in_flight = None
            if rng.random() < 0.2:
                undecided.add(key)
            else:
                fields = EndTransactionRequestHeader(
                    producer_group="PGK", tran_state_table_offset=0, commit_log_offset=0, msg_id=key,
                    commit_or_rollback=rng.choice((TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)),
                    topic="KillTx", transaction_id=reply.ext_fields["transactionId"],
                ).to_ext_fields()  # fmt: skip
                producer.oneway(RequestCode.END_TRANSACTION, fields)
                in_flight = key
            await asyncio.sleep(rng.uniform(0.0, 0.03))
    finally:
        killer.cancel()
        broker.process.kill()
        await producer.close()


async def test_decided_halves_never_checked_undecided_never_forgotten_across_kill9(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("TXMQ_CHAOS_SEED", "9")))
    decided: set[str] = set()
    undecided: set[str] = set()
    checked: set[str] = set()
    for tag in range(ROUNDS):
        with broker_process(tmp_path, *EXTRA) as broker:
            await _round(broker, rng, tag, decided, undecided, checked)  # ends in SIGKILL: no clean stop
            broker.process.wait()
            _KILLED.append(broker.process)
        assert not checked & decided, f"decided halves checked: {sorted(checked & decided)[:5]}"
    with broker_process(tmp_path, *EXTRA) as broker:
        producer = await _producer(broker, checked)
        try:
            for _ in range(200):
                if undecided <= checked:
                    break
                await asyncio.sleep(0.05)
        finally:
            await producer.close()
    assert not checked & decided, f"decided halves checked: {sorted(checked & decided)[:5]}"
    assert undecided <= checked, f"undecided halves never checked: {sorted(undecided - checked)[:5]}"
