#!/bin/bash
# Instruction counts of the broker's side of transport_bench.py's tx scenario, session 21 (txbroker2.md):
# as txbroker_callgrind.sh, plus RemotingEndpoint.data_received (the half's append and the END's decision
# run there, in the read callback; the older script's task_step toggle does not reach them).
# Usage: benchmarks/results/txbroker2_callgrind.sh TREE N   (run N=256 and N=1024; per transaction =
# (I(1024) - I(256)) / 768). Output: /tmp/cg2-<tree>-<N>.out
tree=$1; n=$2; name=$(basename "$tree")
cd "$(dirname "$0")/../.."
PYTHONPATH="$tree/src" valgrind --tool=callgrind --callgrind-out-file="/tmp/cg2-$name-$n.out" \
  --toggle-collect='CPyPy_remoting_transport___RemotingEndpoint___data_received' \
  --toggle-collect='CPyPy_flush___GroupCommit____write_soon' \
  --toggle-collect='CPyPy_remoting_transport___RemotingEndpoint____settle_all' \
  "${PYTHON:-python}" benchmarks/transport_bench.py --src "$tree/src" --only tx --messages "$n" --rounds 1 ${HEADER:+--header $HEADER} > /dev/null 2>&1
grep -h "^summary" "/tmp/cg2-$name-$n.out"
