"""Read topic B of the broker in FILE through Session.pull_arrow; client and broker CPU us/msg."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.environ["TREE"] + "/src")
import resource

import psutil
from pyspark.sql.pandas.types import to_arrow_schema

from txmq.spark import offsets as off
from txmq.spark import options as opt
from txmq.spark.fetch import Session
from txmq.spark.source import spark_schema

ns, pid = Path(sys.argv[1]).read_text().split()
rounds = int(sys.argv[2])
bp = psutil.Process(int(pid))
schema = to_arrow_schema(spark_schema(), timezone="UTC")
opts = opt.parse(
    {"endpoints": ns, "topic": "B", "arrow": "true", "pullBatchSize": os.environ.get("PBS", "1024")},
    streaming=False,
)
with Session(opts) as s:
    keys = s.queues()
    low, high = s.low_high(keys)
me = psutil.Process()
for r in range(rounds):
    n = 0
    c0 = me.cpu_times()
    p0 = time.process_time()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b0 = bp.cpu_times()
    t0 = time.perf_counter()
    for k in keys:
        with Session(opts) as s:
            for batch in s.pull_arrow(off.QueueRange(k[0], k[1], low[k], high[k]), schema):
                n += batch.num_rows
    w = time.perf_counter() - t0
    c1 = me.cpu_times()
    p1 = time.process_time()
    f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b1 = bp.cpu_times()
    cu, cs = (c1.user - c0.user) / n * 1e6, (c1.system - c0.system) / n * 1e6
    bc = (b1.user + b1.system - b0.user - b0.system) / n * 1e6
    print(
        f"{os.environ.get('LABEL', '')} round {r}: {n} {w:.2f}s client {(p1 - p0) / n * 1e6:.2f} "
        f"faults/msg {(f1 - f0) / n:.3f} (user {cu:.2f} sys {cs:.2f}) broker {bc:.2f} us/msg",
        flush=True,
    )
