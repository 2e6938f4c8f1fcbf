#!/bin/bash
# Same-run A/B of the batch-100 cycle (one Producer.send_batch of 100 x 1 KiB in flight, sync flush) between two
# built trees, alternated: the compare harness's txmq driver and slot loop (benchmarks/peers_cost.py, SDK in
# this process, a private broker subprocess) and the protocol-level batch row of benchmarks/remoting_bench.py.
# Each tree runs with its own .venv and src. The load average is printed before each run (2 shared cores: rates
# are noisy, read them side by side, never across runs).
# Usage: benchmarks/batch100_ab.sh BASE_TREE BRANCH_TREE [ROUNDS] [REQUESTS]
base=$1; branch=$2; rounds=${3:-3}; requests=${4:-300}
for round in $(seq "$rounds"); do
  for tree in "$base" "$branch"; do
    name=$(basename "$tree")
    load=$(cut -d' ' -f1 /proc/loadavg)
    home=$(mktemp -d)
    out=$(cd "$tree" && HOME=$home PYTHONPATH="$tree/src:$tree" "$tree/.venv/bin/python" benchmarks/peers_cost.py \
      --workload batch-100 --requests "$requests" 2>&1 | grep "^batch-100")
    rm -rf "$home"
    echo "round $round  $name  load $load  peers_cost: $out"
    load=$(cut -d' ' -f1 /proc/loadavg)
    out=$(cd "$tree" && "$tree/.venv/bin/python" benchmarks/remoting_bench.py --only batch --seconds 3 2>&1 | grep -i "batch" | tail -1)
    echo "round $round  $name  load $load  remoting_bench: $out"
  done
done
