#!/usr/bin/env bash
# Replica heap and edit-to-owner time at N jobs: one etcd, 3 replicas
# (S = 1,024), N bench/jobsgen -yearly jobs (held, never fired) applied
# once every replica is up (format 2); each replica's heap read from
# /metrics three times 10 s apart, SETTLE seconds (default 130) after the
# set reached every replica; then EDITS one-job edits (job 777's schedule,
# changed and changed back), each timed per replica from the set's commit
# (the pointer's applied_at, stamped right before the flip) to the
# replica's "job set installed" log line for that version (the scheduler
# holds the new table). Same clock: everything runs on this host. Then
# (JOIN=1, the default) a 4th replica joins, and each shard it takes is
# timed from its grant to its jobs held and to its catch-up done (its
# "shard taken" log lines; binaries from 2026-12-02 on; JOIN_LOG=FILE
# keeps its log).
#
#   bench/heap/edit.sh BIN [JOBS] [EDITS]
#
# BIN is a shardcron binary; bin/etcd must exist (make etcd). Prints the
# heap per replica (median of three), then one line per edit and replica,
# then p50 and max of the edit lags.
set -euo pipefail
BIN=$1 JOBS=${2:-1000000} EDITS=${3:-4}
. "$(dirname "$0")/etcd.sh"
go build -o "$dir/jobsgen" ./bench/jobsgen
"$dir/jobsgen" -yearly -n "$JOBS" >"$dir/base.yaml"
"$dir/jobsgen" -yearly -n "$JOBS" -edit 777 >"$dir/edit.yaml"
start_replicas "$BIN" edit 3 --shards 1024 --log-format json
metric() { curl -sf "http://$1/metrics" | awk -v m="$2" '$1 == m {printf "%d", $2}'; }
# apply FILE: applies it, waits until every replica runs its version, prints the version.
apply() {
	local v
	/usr/bin/time -f "%e %M" -o "$dir/time" "$BIN" apply --cluster edit --etcd-endpoints "$EP" --timeout 10m -f "$1" -o json >"$dir/out"
	v=$(jq .version "$dir/out")
	echo "apply $(basename "$1") version $v wall_s $(cut -d' ' -f1 "$dir/time") maxrss_kb $(cut -d' ' -f2 "$dir/time") parts $(jq .parts "$dir/out")" >&2
	for a in "${addrs[@]}"; do
		for i in $(seq 1 2400); do [ "$(metric "$a" shardcron_jobs_set_version)" = "$v" ] && break; sleep 0.25; done
	done
	echo "$v"
}
echo "load before: $(cat /proc/loadavg)"
apply "$dir/base.yaml" >/dev/null
sleep "${SETTLE:-130}"
for s in 1 2 3; do
	for a in "${addrs[@]}"; do echo "sample $s $a heap_inuse_bytes $(metric "$a" go_memstats_heap_inuse_bytes) heap_alloc_bytes $(metric "$a" go_memstats_heap_alloc_bytes)"; done
	if [ $s -lt 3 ]; then sleep 10; fi
done >"$dir/samples"
for a in "${addrs[@]}"; do
	i=$(awk -v a="$a" '$3 == a {print $5}' "$dir/samples" | sort -n | sed -n 2p)
	l=$(awk -v a="$a" '$3 == a {print $7}' "$dir/samples" | sort -n | sed -n 2p)
	o=$(metric "$a" shardcron_ownership_shards_owned)
	awk -v a="$a" -v i="$i" -v l="$l" -v o="$o" -v n="$JOBS" 'BEGIN {printf "heap %s shards_owned %d (~%d jobs) heap_inuse %.1f MiB heap_alloc %.1f MiB\n", a, o, n*o/1024, i/1048576, l/1048576}'
done
key=$(printf '/shardcron/edit/jobs/current' | base64 -w0)
for e in $(seq 1 "$EDITS"); do
	f=$dir/edit.yaml
	if [ $((e % 2)) = 0 ]; then f=$dir/base.yaml; fi
	v=$(apply "$f")
	at=$(curl -sf "$EP/v3/kv/range" -d "{\"key\":\"$key\"}" | jq -r '.kvs[0].value | @base64d | fromjson | .applied_at')
	for r in 1 2 3; do
		t=$(jq -r --argjson v "$v" 'select(.msg == "job set installed" and .version == $v) | .time' "$dir/r$r.log" | head -1)
		python3 -c 'import sys, datetime as d
p = lambda s: d.datetime.fromisoformat(s[:26].rstrip("Z") + "+00:00" if "." in s else s.replace("Z", "+00:00"))
print("edit %s version %s replica r%s lag_s %.3f" % (sys.argv[1], sys.argv[2], sys.argv[3], (p(sys.argv[5]) - p(sys.argv[4])).total_seconds()))' "$e" "$v" "$r" "$at" "$t"
	done
done | tee "$dir/lags"
awk '{print $8}' "$dir/lags" | sort -n | awk '{a[NR] = $1} END {printf "edit lag over %d: p50 %.3f s max %.3f s\n", NR, a[int((NR + 1) / 2)], a[NR]}'
if [ "${JOIN:-1}" = 1 ]; then # a 4th replica joins: each shard it takes, from grant to jobs held and to catch-up done
	a="127.0.0.1:$((port + 14))"
	t0=$(date +%s.%N)
	"$BIN" server --cluster edit --node-id r4 --etcd-endpoints "$EP" --http-addr "$a" --shards 1024 --log-format json >"$dir/r4.log" 2>&1 &
	pids+=($!)
	stable=0 last=-1
	for i in $(seq 1 1200); do # until r4's share stays put for 10 s and every shard is owned
		sleep 1
		o=$(metric "$a" shardcron_ownership_shards_owned || echo 0)
		t=0
		for b in "${addrs[@]}" "$a"; do t=$((t + $(metric "$b" shardcron_ownership_shards_owned || echo 0))); done
		if [ "${o:-0}" -gt 0 ] && [ "$o" = "$last" ] && [ "$t" = 1024 ]; then stable=$((stable + 1)); else stable=0; fi
		last=${o:-0}
		[ $stable -ge 10 ] && break
	done
	jq -r 'select(.msg == "shard taken") | "\(.jobs_held_ms) \(.duration_ms) \(.time)"' "$dir/r4.log" >"$dir/taken"
	echo "join: r4 owns $last shards; started $(date -u -d @"${t0%.*}" +%T)"
	for f in 1 2; do
		cut -d' ' -f$f "$dir/taken" | sort -n | awk -v f=$f '{a[NR] = $1} END {printf "join: %s over %d shards: p50 %d ms, max %d ms\n", f == 1 ? "grant to jobs held" : "grant to catch-up done", NR, a[int((NR + 1) / 2)], a[NR]}'
	done
	echo "join: last shard taken at $(cut -d' ' -f3 "$dir/taken" | sort | tail -1); r4 heap_inuse $(($(metric "$a" go_memstats_heap_inuse_bytes) >> 20)) MiB"
	grep -c "not read within the handoff budget" "$dir/r4.log" | sed 's/^/join: shards taken past the handoff budget: /' || true
	if [ -n "${JOIN_LOG:-}" ]; then cp "$dir/r4.log" "$JOIN_LOG"; fi
fi
echo "load after: $(cat /proc/loadavg)"
