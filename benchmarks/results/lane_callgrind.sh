#!/bin/bash
# usage: lane-cg.sh TREE N TAG [PURE]
cd "$(dirname "$0")/../.."
HOME=/tmp/home-lane TXMQ_PURE=${4:-} valgrind --tool=callgrind --callgrind-out-file=/tmp/lane-cg.$3.$2.out \
  /work/venv/bin/python benchmarks/transport_bench.py --only send --rounds 1 --messages $2 --src /work/wt/$1/src > /tmp/lane-cg.$3.$2.log 2>&1
grep -h "summary\|totals" /tmp/lane-cg.$3.$2.out | tail -1
