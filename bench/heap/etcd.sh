# Sourced by heap.sh, restart.sh and edit.sh: one etcd (ETCD, default bin/etcd) on
# a loopback port with its data in a temporary directory, both removed on
# exit with every process in pids; EP is its client URL, dir the directory.
ETCD=${ETCD:-bin/etcd}
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
"$ETCD" --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
	--listen-peer-urls "http://127.0.0.1:$((port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
	--initial-cluster "default=http://127.0.0.1:$((port + 1))" --quota-backend-bytes 8589934592 >"$dir/etcd.log" 2>&1 &
pids+=($!)
EP="http://127.0.0.1:$port"
for i in $(seq 1 300); do curl -sf "$EP/health" >/dev/null && break; sleep 0.2; done
# start_replicas BIN CLUSTER N [FLAG...]: replicas r1..rN of BIN on ports
# after etcd's (logs in $dir/rK.log, addresses in addrs), each waited for
# until healthy, then 3 s more so that every member is registered (an
# apply then writes format 2).
start_replicas() {
	local bin=$1 cluster=$2 n=$3 a r i
	shift 3
	addrs=()
	for r in $(seq 1 "$n"); do
		a="127.0.0.1:$((port + 10 + r))"
		addrs+=("$a")
		"$bin" server --cluster "$cluster" --node-id "r$r" --etcd-endpoints "$EP" --http-addr "$a" "$@" >"$dir/r$r.log" 2>&1 &
		pids+=($!)
	done
	for a in "${addrs[@]}"; do
		for i in $(seq 1 300); do curl -sf "http://$a/healthz" >/dev/null && break; sleep 0.2; done
	done
	sleep 3
}
