"""The CPU a broker spends while nobody talks to it: ``idlecpu.py FILE [SECONDS] [STEP]`` (FILE as
serve.py writes it: namesrv and pid). Prints the broker's CPU seconds per STEP and its threads' totals,
to see background work (flushes, index building, checkpoints) after a preload."""

import sys
import time
from pathlib import Path

import psutil

pid = int(Path(sys.argv[1]).read_text().split()[1])
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
step = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
broker = psutil.Process(pid)


def total() -> float:
    t = broker.cpu_times()
    return t.user + t.system


start = last = total()
began = time.monotonic()
while time.monotonic() - began < seconds:
    time.sleep(step)
    now = total()
    print(f"t={time.monotonic() - began:6.1f}s cpu {now - last:6.3f}s in {step:.0f}s", flush=True)
    last = now
print(
    f"total {total() - start:.3f}s over {seconds:.0f}s; threads:",
    sorted(((round(t.user_time + t.system_time, 2), t.id) for t in broker.threads()), reverse=True)[:6],
)
