#!/bin/bash
# The SDK's instructions per batch-100 request (one Producer.send_batch of 100 x 1 KiB, one in flight, sync
# flush), the client process only: the compare harness's txmq driver and slot loop (benchmarks/peers_cost.py
# --workload batch-100) under callgrind; the broker is a child process, not traced.
# Usage: benchmarks/batch100_client_cg.sh SRC N [TAG]   SRC: a txmq src/ directory (compiled), N: batches
# Run N=20 and N=60: per batch = (I(60) - I(20)) / 40. Output: /tmp/batch100-client-cg/<TAG>-<N>.out and its
# "summary" line. Per function: callgrind_annotate --inclusive=yes OUT.
# PYTHON (default: this tree's .venv) is the interpreter for every tree, so only the sources differ.
src=$1; n=$2; tag=${3:-$(basename "$(dirname "$src")")}
cd "$(dirname "$0")/.."
py=${PYTHON:-$PWD/.venv/bin/python}
mkdir -p /tmp/batch100-client-cg
home=$(mktemp -d)
HOME=$home PYTHONPATH="$src:$PWD" valgrind --tool=callgrind --callgrind-out-file="/tmp/batch100-client-cg/$tag-$n.out" \
  "$py" benchmarks/peers_cost.py --workload batch-100 --requests "$n" > "/tmp/batch100-client-cg/$tag-$n.log" 2>&1
rm -rf "$home"
grep -h "^summary" "/tmp/batch100-client-cg/$tag-$n.out"
