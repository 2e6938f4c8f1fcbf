#!/bin/bash
# Instruction counts of one-in-flight SEND_BATCH_MESSAGE requests of 100 x 1 KB (benchmarks/batchpath_cg.py)
# for a tree with its own venv.
# Usage: benchmarks/batchpath_cg.sh TREE N [TAG]   (run N=20 and N=60; per message = (I(60) - I(20)) / 4000)
# Output: /tmp/batchpathcg/<tree>-<N><TAG>.out and its "summary" line. Run once without callgrind first
# for each N (the frames are rendered into $TMPDIR once): "$TREE/.venv/bin/python benchmarks/batchpath_cg.py N".
# TXMQ_PURE=1 in the environment runs the tree's pure Python.
tree=$1; n=$2; tag=${3:-}; name=$(basename "$tree")
cd "$(dirname "$0")/.."
mkdir -p /tmp/batchpathcg
PYTHONPATH="$tree/src" valgrind --tool=callgrind --callgrind-out-file="/tmp/batchpathcg/$name-$n$tag.out" \
  "$tree/.venv/bin/python" benchmarks/batchpath_cg.py "$n" > /dev/null 2>&1
grep -h "^summary" "/tmp/batchpathcg/$name-$n$tag.out"
