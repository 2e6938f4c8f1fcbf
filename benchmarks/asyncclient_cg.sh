#!/bin/bash
# The SDK's instructions per async-256 message (issue 8), the client process only: the compare
# harness's txmq driver and slot loop (benchmarks/peers_cost.py) under callgrind; the broker is a child
# process, not traced (valgrind does not follow children by default).
# Usage: benchmarks/asyncclient_cg.sh SRC N [TAG]   SRC: a txmq src/ directory (compiled), N: requests per slot
# Run N=10 and N=30: per message = (I(30) - I(10)) / (20 * 256). Output: /tmp/asyncclient-cg/<TAG>-<N>.out and
# the "summary" line (total instructions). Per-function: callgrind_annotate --inclusive=yes OUT.
# PYTHON (default: this tree's .venv) is the interpreter for every tree, so only the sources differ.
src=$1; n=$2; tag=${3:-$(basename "$(dirname "$src")")}
cd "$(dirname "$0")/.."
py=${PYTHON:-$PWD/.venv/bin/python}
mkdir -p /tmp/asyncclient-cg
home=$(mktemp -d)
HOME=$home PYTHONPATH="$src:$PWD" valgrind --tool=callgrind --callgrind-out-file="/tmp/asyncclient-cg/$tag-$n.out" \
  "$py" benchmarks/peers_cost.py --workload async-256 --requests "$n" > "/tmp/asyncclient-cg/$tag-$n.log" 2>&1
rm -rf "$home"
grep -h "^summary" "/tmp/asyncclient-cg/$tag-$n.out"
