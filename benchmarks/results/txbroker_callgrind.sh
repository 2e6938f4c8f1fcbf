#!/bin/bash
# Instruction counts of the broker's side of transport_bench.py's tx scenario (benchmarks/results/txbroker.md):
# collected only inside asyncio task steps, the group-write callback and the deferred answers.
# Usage: benchmarks/results/txbroker_callgrind.sh TREE N   (TREE: a worktree with a built src/; run N=256 and
# N=1024 and take (I(1024) - I(256)) / 768 per transaction). Output: /tmp/cg-<tree>-<N>.out
tree=$1; n=$2; name=$(basename "$tree")
cd "$(dirname "$0")/../.."
PYTHONPATH="$tree/src" valgrind --tool=callgrind --callgrind-out-file="/tmp/cg-$name-$n.out" \
  --toggle-collect='task_step' --toggle-collect='CPyPy_flush___GroupCommit____write_soon' \
  --toggle-collect='CPyPy_remoting_transport___RemotingEndpoint____settle_all' \
  "${PYTHON:-python}" benchmarks/transport_bench.py --src "$tree/src" --only tx --messages "$n" --rounds 1 > /dev/null 2>&1
grep -h "^summary" "/tmp/cg-$name-$n.out"
