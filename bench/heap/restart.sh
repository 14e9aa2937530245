#!/usr/bin/env bash
# Restart time at N jobs: one etcd, 3 replicas (S = 1,024), N jobs applied
# (format 2), every shard owned; then all three stopped (SIGTERM) and
# started again, timed until the three together own all 1,024 shards
# (shardcron_ownership_shards_owned). Jobs fire once a year.
#
#   bench/heap/restart.sh BIN [JOBS]
set -euo pipefail
BIN=$1 JOBS=${2:-100000}
. "$(dirname "$0")/etcd.sh"
{ echo "jobs:"; for ((i = 0; i < JOBS; i++)); do printf '  - {name: job-%07d, schedule: "0 0 0 1 1 *", http: {url: "http://127.0.0.1:9/job-%07d"}}\n' "$i" "$i"; done; } >"$dir/jobs.yaml"
start() { rp=(); for r in 1 2 3; do "$BIN" server --cluster rs --node-id "r$r" --etcd-endpoints "$EP" --http-addr "127.0.0.1:$((port + 10 + r))" --shards 1024 --log-level warn >>"$dir/r$r.log" 2>&1 & rp+=($!); pids+=($!); done; }
owned() { t=0; for r in 1 2 3; do n=$(curl -sf "http://127.0.0.1:$((port + 10 + r))/metrics" 2>/dev/null | awk '/^shardcron_ownership_shards_owned /{printf "%d", $2}'); t=$((t + ${n:-0})); done; echo $t; }
start
for r in 1 2 3; do for i in $(seq 1 300); do curl -sf "http://127.0.0.1:$((port + 10 + r))/healthz" >/dev/null && break; sleep 0.2; done; done
sleep 3
for i in 1 2 3; do "$BIN" apply --cluster rs --etcd-endpoints "$EP" -f "$dir/jobs.yaml" >/dev/null && break; sleep 5; done
for i in $(seq 1 600); do [ "$(owned)" = 1024 ] && break; sleep 0.5; done
kill -TERM "${rp[@]}"; wait "${rp[@]}" 2>/dev/null || true
t0=$(date +%s.%N)
start
for i in $(seq 1 1200); do [ "$(owned)" = 1024 ] && break; sleep 0.25; done
t1=$(date +%s.%N)
echo "restart to 1024 shards owned: $(echo "$t1 - $t0" | bc) s, load $(cat /proc/loadavg)"
