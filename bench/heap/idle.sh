#!/usr/bin/env bash
# bench/heap/idle.sh BIN: 3 replicas, no jobs, against one etcd; etcd's Range requests and CPU over 30 s.
set -euo pipefail
BIN=$1
. bench/heap/etcd.sh
start_replicas "$BIN" idle 3
sleep 10
epid=${pids[0]}
rng() { curl -sf "$EP/metrics" | awk '/^grpc_server_handled_total/ && /grpc_method="Range"/ {s+=$2} END {print s+0}'; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
r0=$(rng); c0=$(cpu $epid); rc0=0; for p in "${pids[@]:1}"; do rc0=$((rc0 + $(cpu $p))); done
sleep 30
r1=$(rng); c1=$(cpu $epid); rc1=0; for p in "${pids[@]:1}"; do rc1=$((rc1 + $(cpu $p))); done
echo "$(basename $BIN): etcd Range/s $(( (r1 - r0) / 30 )), etcd CPU $(( (c1 - c0) * 10 / 30 )) ms/s, replicas CPU $(( (rc1 - rc0) * 10 / 30 )) ms/s"
