#!/bin/bash
# Instruction counts of one-in-flight sync-flush sends (benchmarks/single1_cg.py) for a tree with its own venv.
# Usage: benchmarks/single1_cg.sh TREE N [TAG]   (run N=100 and N=400; per message = (I(400) - I(100)) / 300)
# Output: /tmp/single1cg/<tree>-<N><TAG>.out and its "summary" line. Run once without callgrind first
# for each N (the frames are rendered into $TMPDIR once): "$TREE/.venv/bin/python benchmarks/single1_cg.py N".
tree=$1; n=$2; tag=${3:-}; name=$(basename "$tree")
cd "$(dirname "$0")/.."
mkdir -p /tmp/single1cg
PYTHONPATH="$tree/src" valgrind --tool=callgrind --callgrind-out-file="/tmp/single1cg/$name-$n$tag.out" \
  "$tree/.venv/bin/python" benchmarks/single1_cg.py "$n" ${CHECKPOINT:+--checkpoint} > /dev/null 2>&1
grep -h "^summary" "/tmp/single1cg/$name-$n$tag.out"
