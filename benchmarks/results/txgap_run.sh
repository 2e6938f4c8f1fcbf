#!/bin/bash
# usage: run.sh TREE DURATION MODE(strace|perf|none) OUT
TREE=$1; DUR=$2; MODE=$3; OUT=$4
cd $TREE
PYTHONPATH=$TREE/src /work/venv/bin/python -m txmq bench compare --systems txmq-sync --workloads tx-8 --duration $DUR --rounds 1 --no-chart > $OUT.bench 2>&1 &
BPID=$!
PID=""
for i in $(seq 1 200); do
  for p in $(pgrep -f "txmq broker --data-dir .*bench-txmq-"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q "^PYTHONPATH=$TREE/src"; then PID=$p; fi
  done
  [ -n "$PID" ] && break
  sleep 0.1
done
echo "broker pid $PID" > $OUT.info
# wait for workers to appear (8 txmq_worker processes)
for i in $(seq 1 200); do
  n=0; for p in $(pgrep -f "txmq_worker"); do tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q "^PYTHONPATH=$TREE/src" && n=$((n+1)); done; [ "$n" -ge 8 ] && break; sleep 0.1
done
sleep 1.5
(while kill -0 $PID 2>/dev/null; do echo "$(date +%s.%N) $(awk '{print $14, $15}' /proc/$PID/stat)"; sleep 0.5; done) > $OUT.timeline 2>/dev/null &
for t in /proc/$PID/task/*; do echo "$(basename $t) $(cat $t/comm | tr " " _) $(awk '{print $14, $15}' $t/stat)"; done > $OUT.th0
T0=$(awk '{print $14+$15}' /proc/$PID/stat)
W0=$(date +%s.%N)
case $MODE in
  strace) timeout -s INT $((DUR-3)) strace -c -f -p $PID -o $OUT.strace ;;
  perf) timeout -s INT $((DUR-3)) perf record -g -F 999 -p $PID -o $OUT.perf.data >/dev/null 2>&1 ;;
  pyspy) timeout -s INT $((DUR-3)) /work/venv/bin/py-spy record -r 250 --native -f raw -o $OUT.raw -p $PID >/dev/null 2>&1 ;;
  pyspyt) timeout -s INT $((DUR-3)) /work/venv/bin/py-spy record -r 300 --nonblocking --gil -f raw -o $OUT.raw -p $PID >/dev/null 2>&1 ;;
  *) sleep $((DUR-3)) ;;
esac
for t in /proc/$PID/task/*; do echo "$(basename $t) $(cat $t/comm | tr " " _) $(awk '{print $14, $15}' $t/stat)"; done > $OUT.th1
T1=$(awk '{print $14+$15}' /proc/$PID/stat)
W1=$(date +%s.%N)
echo "ticks $((T1-T0)) wall $(echo "$W1-$W0"|bc)" >> $OUT.info
awk '{print "utime",$14,"stime",$15}' /proc/$PID/stat >> $OUT.info
wait $BPID
cat $OUT.info; grep -i "tx-8\|txmq-sync" $OUT.bench | head
