#!/usr/bin/env bash
# Replica heap and one-job edit figures at 10,000, 100,000 and 1,000,000
# jobs (BENCHMARKS.md, "A million jobs"): etcd at $SHARDCRON_ETCD_ENDPOINTS
# and replicas already running in cluster $CLUSTER with their HTTP on
# $PORTS; applies bench/jobsgen -yearly files (held, never fired) and reads
# each replica's /metrics.
#
#	SHARDCRON=bin/shardcron CLUSTER=r1m PORTS="19081 19082 19083" bench/jobsgen/replicas.sh
set -euo pipefail
: "${SHARDCRON:=bin/shardcron}" "${CLUSTER:=r1m}" "${PORTS:=19081 19082 19083}" "${SIZES:=10000 100000 1000000}"
dir=$(mktemp -d)
metric() { curl -s "127.0.0.1:$1/metrics" | awk -v m="$2" '$1==m {printf "%.0f\n", $2}'; }
now() { date +%s.%N; }
# reached V: seconds until every replica runs job set version V (polled every 50 ms).
reached() {
	local v=$1 start=$2
	for p in $PORTS; do
		until [ "$(metric "$p" shardcron_jobs_set_version)" = "$v" ]; do sleep 0.05; done
	done
	echo "$(now) - $start" | bc
}
apply() { # apply FILE: prints "version wall_s bytes parts maxrss_kb", then waits for the replicas
	local start out v
	start=$(now)
	/usr/bin/time -f "%e %M" -o "$dir/time" "$SHARDCRON" apply -f "$1" --cluster "$CLUSTER" -o json > "$dir/out"
	v=$(jq .version "$dir/out")
	echo "version $v apply_wall_s $(cut -d' ' -f1 "$dir/time") bytes $(jq .bytes "$dir/out") parts $(jq .parts "$dir/out") apply_maxrss_kb $(cut -d' ' -f2 "$dir/time") replicas_have_it_after_s $(reached "$v" "$start")"
}
heaps() {
	sleep 15 # a collection or two after the new set
	for p in $PORTS; do echo "  replica :$p heap_inuse_MB $(( $(metric "$p" go_memstats_heap_inuse_bytes) >> 20 )) jobs $(metric "$p" shardcron_jobs_count)"; done
}
uptime
for n in $SIZES; do
	go run ./bench/jobsgen -yearly -n "$n" > "$dir/jobs.yaml"
	echo "== $n jobs: $(apply "$dir/jobs.yaml")"
	heaps
done
n=${SIZES##* }
go run ./bench/jobsgen -yearly -n "$n" -edit 777 > "$dir/edit.yaml"
echo "== one-job edit at $n jobs: $(apply "$dir/edit.yaml")"
uptime
rm -r "$dir"
