#!/usr/bin/env bash
# validate and apply of bench/jobsgen files, each binary of $BINS in turn
# (so that ratios come from one run), against etcd at
# $SHARDCRON_ETCD_ENDPOINTS: wall time and peak RSS (/usr/bin/time), and
# what the apply wrote. Applies go to cluster "cli-<binary>-<n>", which has
# no replicas (format 1), then a one-job edit of the same set; with
# EDIT_CLUSTER set, a one-job edit there too (format 2 when its replicas
# read it; -yearly jobs, as bench/jobsgen/replicas.sh applies).
#
#	BINS="/tmp/before bin/shardcron" SIZES="100000 1000000" bench/jobsgen/cli.sh
set -euo pipefail
: "${BINS:=bin/shardcron}" "${SIZES:=100000 1000000}"
dir=$(mktemp -d)
go build -o "$dir/jobsgen" ./bench/jobsgen
run() { # run LABEL CMD...: one line of figures
	local label=$1
	shift
	/usr/bin/time -f "%e %M" -o "$dir/time" "$@" > "$dir/out" 2> "$dir/err" || { echo "$label: failed: $(head -c 300 "$dir/err")"; return; }
	local extra=""
	if [ "$(head -c 1 "$dir/out")" = "{" ]; then
		extra="version $(jq .version "$dir/out") format $(jq .format "$dir/out") parts $(jq .parts "$dir/out") chunks $(jq .chunks "$dir/out") bytes $(jq .bytes "$dir/out")"
	fi
	echo "$label: wall_s $(cut -d' ' -f1 "$dir/time") maxrss_MB $(($(cut -d' ' -f2 "$dir/time") / 1024)) $extra"
}
uptime
for n in $SIZES; do
	"$dir/jobsgen" -n "$n" > "$dir/jobs.yaml"
	"$dir/jobsgen" -n "$n" -edit 777 > "$dir/edit.yaml"
	for b in $BINS; do
		c="cli-$(basename "$b")-$n"
		run "$n $(basename "$b") validate" "$b" validate -f "$dir/jobs.yaml"
		run "$n $(basename "$b") apply (new cluster)" "$b" apply -o json --cluster "$c" -f "$dir/jobs.yaml"
		run "$n $(basename "$b") apply (one-job edit)" "$b" apply -o json --cluster "$c" -f "$dir/edit.yaml"
		run "$n $(basename "$b") apply (unchanged)" "$b" apply -o json --cluster "$c" -f "$dir/edit.yaml"
	done
	uptime
done
if [ -n "${EDIT_CLUSTER:-}" ]; then
	n=${SIZES##* }
	for b in $BINS; do
		for e in 1000 2000; do
			"$dir/jobsgen" -yearly -n "$n" -edit "$e" > "$dir/edit.yaml"
			run "$n $(basename "$b") apply (one-job edit, $EDIT_CLUSTER)" "$b" apply -o json --cluster "$EDIT_CLUSTER" -f "$dir/edit.yaml"
		done
	done
	uptime
fi
rm -r "$dir"
