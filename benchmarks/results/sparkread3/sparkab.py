"""Spark noop read of topic B (1M x 1 KiB, 4 queues) from the broker in FILE, with TREE's txmq in the
driver and Python workers; ROUNDS rounds, each: msg/s and CPU us/msg of workers, JVM, broker."""

import json
import os
import sys
import time
from pathlib import Path

tree = os.environ["TREE"]
sys.path.insert(0, tree + "/src")
import psutil  # noqa: E402

ns, pid = Path(sys.argv[1]).read_text().split()
rounds = int(sys.argv[2])
N = int(sys.argv[3])
broker = psutil.Process(int(pid))
os.environ["PYTHONPATH"] = tree + "/src"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
from pyspark.sql import SparkSession  # noqa: E402

spark = (
    SparkSession.builder.master("local[2]")
    .appName("sr3")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.memory", "2g")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
import txmq  # noqa: E402
import txmq.spark  # noqa: E402

assert txmq.__file__.startswith(tree), txmq.__file__
txmq.spark.register(spark)


def cpu():
    w = j = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            name = p.name()
            t = p.cpu_times()
        except psutil.Error:
            continue
        if "python" in name:
            w += t.user + t.system + t.children_user + t.children_system
        elif "java" in name:
            j += t.user + t.system
    b = broker.cpu_times()
    return w, j, b.user + b.system


tiny = {"B": {str(q): 10 for q in range(4)}}
spark.read.format("txmq").option("endpoints", ns).option("topic", "B").option(
    "endingOffsets", json.dumps(tiny)
).load().count()
for r in range(rounds):
    df = spark.read.format("txmq").option("endpoints", ns).option("topic", "B").option("arrow", "true").load()
    c0 = cpu()
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    secs = time.perf_counter() - t0
    c1 = cpu()
    w, j, b = ((c1[i] - c0[i]) / N * 1e6 for i in range(3))
    print(
        f"{os.environ.get('LABEL', '')} round {r + 1}: {N / secs:,.0f} msg/s  CPU us/msg workers {w:.2f} "
        f"JVM {j:.2f} broker {b:.2f} total {w + j + b:.2f}  load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
spark.stop()
