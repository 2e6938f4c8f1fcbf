import asyncio, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/tests")
from broker.conftest import make_config
from txmq.broker.broker import Broker
from txmq.broker.send import SendContext
from txmq.common.clock import FakeClock
from txmq.common.message import Message
CTX = SendContext(producer_group="pg", born_host="127.0.0.1:1")
async def main(n):
    clock = FakeClock(start_ms=1_800_000_000_000)
    b = await Broker.open(make_config(Path(tempfile.mkdtemp())), clock=clock)
    for i in range(n):
        (r,) = await b.send([Message(topic="pay", body=b"x", transactional=True)], CTX)
        await b.end_transaction(topic="pay", message_id=r.message_id, transaction_id=r.transaction_id, commit=i % 3 != 1, from_check=False)
    t0 = time.process_time(); text = b.transactions.snapshot_json(); t1 = time.process_time()
    print(f"{sys.argv[1]}: {n} decided halves within the timeout: snapshot {len(text)} bytes, snapshot_json {1000*(t1-t0):.2f} ms CPU")
    await b.close()
asyncio.run(main(int(sys.argv[2])))
