#!/usr/bin/env bash
# Replica heap at N jobs: one etcd, R replicas (S shards), N jobs applied
# once every replica is up (so the set is stored in format 2), then each
# replica's go_memstats_heap_inuse_bytes read from /metrics, three times
# 10 s apart, once the set is loaded everywhere and SETTLE seconds (default
# 130) have passed: the Go runtime forces a collection every 2 minutes, so
# the figure is what a replica keeps, not the garbage of its first read.
# The jobs fire once a year (no runs during the window).
#
#   bench/heap/heap.sh BIN [JOBS] [REPLICAS] [SHARDS]
#
# BIN is a shardcron binary; bin/etcd must exist (make etcd). Prints one
# line per replica and sample, then the median per replica.
set -euo pipefail
BIN=$1 JOBS=${2:-100000} REPLICAS=${3:-3} SHARDS=${4:-1024}
. "$(dirname "$0")/etcd.sh"
{
	echo "jobs:"
	for ((i = 0; i < JOBS; i++)); do
		printf '  - {name: job-%07d, schedule: "0 0 0 1 1 *", http: {url: "http://127.0.0.1:9/job-%07d", method: POST, headers: {X-Tenant: t%d}}}\n' "$i" "$i" "$((i % 977))"
	done
} >"$dir/jobs.yaml"
start_replicas "$BIN" heap "$REPLICAS" --shards "$SHARDS" --log-level warn
for i in 1 2 3; do "$BIN" apply --cluster heap --etcd-endpoints "$EP" -f "$dir/jobs.yaml" >/dev/null && break; sleep 5; done
for a in "${addrs[@]}"; do
	for i in $(seq 1 600); do
		n=$(curl -sf "http://$a/metrics" | awk '/^shardcron_jobs_count /{print $2}')
		[ "${n:-0}" = "$JOBS" ] && curl -sf "http://$a/readyz" >/dev/null && break
		sleep 0.5
	done
done
sleep "${SETTLE:-130}" # the shards settled and a forced collection ran
for s in 1 2 3; do
	for a in "${addrs[@]}"; do
		m=$(curl -sf "http://$a/metrics")
		h=$(awk '/^go_memstats_heap_inuse_bytes /{printf "%d", $2}' <<<"$m")
		l=$(awk '/^go_memstats_heap_alloc_bytes /{printf "%d", $2}' <<<"$m")
		echo "sample $s $a heap_inuse_bytes $h heap_alloc_bytes $l"
	done
	if [ $s -lt 3 ]; then sleep 10; fi
done | tee "$dir/samples"
for a in "${addrs[@]}"; do
	i=$(awk -v a="$a" '$3 == a {print $5}' "$dir/samples" | sort -n | sed -n 2p)
	l=$(awk -v a="$a" '$3 == a {print $7}' "$dir/samples" | sort -n | sed -n 2p)
	o=$(curl -sf "http://$a/metrics" | awk '/^shardcron_ownership_shards_owned /{printf "%d", $2}')
	awk -v a="$a" -v i="$i" -v l="$l" -v o="$o" 'BEGIN {printf "median %s heap_inuse %.1f MiB heap_alloc %.1f MiB shards_owned %s\n", a, i/1048576, l/1048576, o}'
done
echo "load $(cat /proc/loadavg)"
