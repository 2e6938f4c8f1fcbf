#!/bin/bash
# Instruction counts of committed transactions (benchmarks/txcpu_cg.py) for a tree with its own venv.
# Usage: benchmarks/txcpu_cg.sh TREE N [TAG]   (run N=100 and N=400; per tx = (I(400) - I(100)) / 300)
# PRODUCERS=K: K producers, one transaction in flight each (default 1). PURE=1: TXMQ_PURE=1.
# Output: /tmp/txcpucg/<tree>-<N>-<K><TAG>.out and its "summary" line. Run once without callgrind first
# for each N and K (the frames are rendered into $TMPDIR once):
#   PYTHONPATH=$TREE/src $TREE/.venv/bin/python benchmarks/txcpu_cg.py N --producers K
tree=$1; n=$2; tag=${3:-}; name=$(basename "$tree"); k=${PRODUCERS:-1}
cd "$(dirname "$0")/.."
mkdir -p /tmp/txcpucg
out="/tmp/txcpucg/$name-$n-$k$tag.out"
env PYTHONPATH="$tree/src" ${PURE:+TXMQ_PURE=1} valgrind --tool=callgrind --callgrind-out-file="$out" \
  "$tree/.venv/bin/python" benchmarks/txcpu_cg.py "$n" --producers "$k" ${CHECKPOINT:+--checkpoint} \
  > "$out.log" 2>&1 || { tail -5 "$out.log"; exit 1; }
grep -h "^done" "$out.log"
grep -h "^summary" "$out"
