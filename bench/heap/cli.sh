#!/usr/bin/env bash
# Wall time and peak RSS of the read commands at N jobs (BENCHMARKS.md,
# "The read commands"): one etcd, one replica (so the set is stored in
# format 2), N jobs applied, then for each shardcron binary in BINS
# `status`, `history` of one job and `suspend`/`resume` of it, each
# REPS times, alternating binaries, with /usr/bin/time.
#
#   BINS="/tmp/before bin/shardcron" bench/heap/cli.sh [JOBS] [REPS]
set -euo pipefail
JOBS=${1:-100000} REPS=${2:-3}
: "${BINS:=bin/shardcron}"
. "$(dirname "$0")/etcd.sh"
first=${BINS%% *}
{
	echo "jobs:"
	for ((i = 0; i < JOBS; i++)); do
		printf '  - {name: job-%07d, schedule: "0 0 0 1 1 *", http: {url: "http://127.0.0.1:9/job-%07d", method: POST, headers: {X-Tenant: t%d}}}\n' "$i" "$i" "$((i % 977))"
	done
} >"$dir/jobs.yaml"
a="127.0.0.1:$((port + 10))"
"$first" server --cluster cli --node-id r1 --etcd-endpoints "$EP" --http-addr "$a" --shards 1024 --log-level warn >"$dir/r1.log" 2>&1 &
pids+=($!)
for i in $(seq 1 300); do curl -sf "http://$a/healthz" >/dev/null && break; sleep 0.2; done
sleep 3 # the member registered, so apply writes format 2
"$first" apply --cluster cli --etcd-endpoints "$EP" -f "$dir/jobs.yaml" >/dev/null
job=$(printf 'job-%07d' $((JOBS / 2)))
run() { # run BIN ARGS...: prints "wall_s maxrss_kb"
	local bin=$1
	shift
	/usr/bin/time -f "%e %M" -o "$dir/time" "$bin" "$@" --cluster cli --etcd-endpoints "$EP" >/dev/null
	cat "$dir/time"
}
for rep in $(seq 1 "$REPS"); do
	for bin in $BINS; do
		echo "$bin status: $(run "$bin" status)"
		echo "$bin history $job: $(run "$bin" history "$job")"
		echo "$bin suspend $job: $(run "$bin" suspend "$job")"
		echo "$bin resume $job: $(run "$bin" resume "$job")"
	done
done
echo "load $(cat /proc/loadavg)"
