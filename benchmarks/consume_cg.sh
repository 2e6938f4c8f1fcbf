#!/bin/bash
# Instructions per consumed message of consume-256 (benchmarks/consume_cost.py), client process and
# broker process, each under callgrind, for a tree with its own venv (the tree's SDK, driver and broker).
# Usage: benchmarks/consume_cg.sh TREE N [TAG]   (run N=5120 and N=20480, both with 20480 preloaded;
# per message = (I(20480) - I(5120)) / 15360 for each side)
# Output: /tmp/consumecg/<tree>-<N><TAG>.{client,broker}.out.1: the counters of the consume loop alone
# (zeroed right before it, dumped right after it: consume_cost.py's _Marks), and their "totals" lines
# (client first); the .out files without .1 hold the rest of each run (start-up, preload, teardown).
# Per function: callgrind_annotate --inclusive=yes OUT. PRELOAD=M changes the stored count (>= N).
tree=$1; n=$2; tag=${3:-}; name=$(basename "$tree"); preload=${PRELOAD:-20480}
cd "$(dirname "$0")/.."
mkdir -p /tmp/consumecg
out="/tmp/consumecg/$name-$n$tag"
home=$(mktemp -d)
HOME=$home PYTHONPATH="$tree/src:$tree" valgrind --tool=callgrind --callgrind-out-file="$out.client.out" \
  "$tree/.venv/bin/python" benchmarks/consume_cost.py --consume "$n" --preload "$preload" \
  --broker-callgrind "$out.broker.out" > "$out.log" 2>&1 || { tail -5 "$out.log"; rm -rf "$home"; exit 1; }
rm -rf "$home"
grep -h "^consume" "$out.log"
grep -h "^totals" "$out.client.out.1" "$out.broker.out.1"
