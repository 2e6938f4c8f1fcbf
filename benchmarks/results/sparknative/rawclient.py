"""Pull topic B raw (Session._batches + _pull_raw, no conversion); client and broker CPU us/msg.
MODE=raw|join;
N = the messages in topic B (sparkread3/rawclient.py with N instead of a fixed 200,000)."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ["TREE"] + "/src")
import resource

import psutil

from txmq.common import limits
from txmq.spark import offsets as off
from txmq.spark import options as opt
from txmq.spark.fetch import Session, _joined

ns, pid = Path(sys.argv[1]).read_text().split()
rounds = int(sys.argv[2])
bp = psutil.Process(int(pid))
opts = opt.parse(
    {"endpoints": ns, "topic": "B", "pullBatchSize": os.environ.get("PBS", "1024")}, streaming=False
)
with Session(opts) as s:
    keys = s.queues()
    low, high = s.low_high(keys)
me = psutil.Process()
for r in range(rounds):
    n = 0
    pulls = 0
    c0 = me.cpu_times()
    p0 = time.process_time()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b0 = bp.cpu_times()
    t0 = time.perf_counter()
    for k in keys:
        rng = off.QueueRange(k[0], k[1], low[k], high[k])
        with Session(opts) as s:
            if os.environ.get("MODE") == "join":
                for body in _joined(s._batches(rng, s._pull_raw), limits.spark_arrow_batch_bytes):
                    n += len(body) // 1150
                    pulls += 1
            else:
                for raw in s._batches(rng, s._pull_raw):
                    n += len(raw.body) // 1150
                    pulls += 1
    w = time.perf_counter() - t0
    c1 = me.cpu_times()
    p1 = time.process_time()
    f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b1 = bp.cpu_times()
    n = int(os.environ.get("N", "200000"))  # the messages in topic B
    cu, cs = (c1.user - c0.user) / n * 1e6, (c1.system - c0.system) / n * 1e6
    bc = (b1.user + b1.system - b0.user - b0.system) / n * 1e6
    print(
        f"{os.environ.get('LABEL', '')} round {r}: {pulls} {w:.2f}s client {(p1 - p0) / n * 1e6:.2f} "
        f"faults/msg {(f1 - f0) / n:.3f} (user {cu:.2f} sys {cs:.2f}) broker {bc:.2f} us/msg",
        flush=True,
    )
