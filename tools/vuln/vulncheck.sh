#!/usr/bin/env bash
# govulncheck against a local vulnerability database, for machines that
# cannot reach vuln.go.dev: the database is built from the OSV entries that
# the golang.org/x/vulndb module carries (data/osv), indexed by its
# cmd/indexdb, and cached per vulndb version, so it is built once.
#
# Refresh: move the vulndb version in this module to a newer one,
#   (cd tools/vuln && go get golang.org/x/vulndb@latest && go mod tidy)
# and commit tools/vuln/go.mod and go.sum; the next run builds the new
# database. SHARDCRON_VULNDB points at another database directory instead
# (such as a copy of https://vuln.go.dev mirrored by other means).
#
# Exit status: govulncheck's, non-zero when a vulnerable symbol is
# reachable from shardcron's code (imported but unreached ones are only
# listed by -show verbose).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tools="$root/tools/vuln"
bin="$root/bin"
mkdir -p "$bin"

# Build from the tools module, so its dependencies never touch go.mod.
(cd "$tools" && go build -o "$bin/govulncheck" golang.org/x/vuln/cmd/govulncheck \
	&& go build -o "$bin/vulndb-indexdb" golang.org/x/vulndb/cmd/indexdb)

db="${SHARDCRON_VULNDB:-}"
if [ -z "$db" ]; then
	version="$(cd "$tools" && go list -m -f '{{.Version}}' golang.org/x/vulndb)"
	cache="${XDG_CACHE_HOME:-$HOME/.cache}/shardcron/vulndb"
	db="$cache/$version"
	if [ ! -f "$db/index/db.json" ]; then
		src="$(cd "$tools" && go mod download -json golang.org/x/vulndb | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		[ -d "$src/data/osv" ] || { echo "vulncheck: no data/osv in $src" >&2; exit 1; }
		mkdir -p "$cache"
		tmp="$(mktemp -d "$cache/.build-XXXXXX")"
		trap 'rm -rf "$tmp"' EXIT
		echo "vulncheck: indexing $(ls "$src/data/osv" | wc -l) OSV entries of golang.org/x/vulndb $version into $db" >&2
		"$bin/vulndb-indexdb" -vulns "$src/data/osv" -out "$tmp/db"
		rm -rf "$db"
		mv "$tmp/db" "$db"
	fi
fi

cd "$root"
rc=0
"$bin/govulncheck" -db "file://$db" "$@" ./... || rc=$?
if [ "$rc" -ne 0 ]; then
	want="$(sed -n 's/^toolchain //p' go.mod)"
	have="$(go env GOVERSION)"
	if [ -n "$want" ] && [ "$want" != "$have" ]; then
		echo "vulncheck: the standard library was checked at $have; go.mod asks for $want" \
			"(GOTOOLCHAIN=$(go env GOTOOLCHAIN) keeps $have). Standard library findings go away with" \
			"the newer toolchain: install it, or run with GOTOOLCHAIN=auto (it comes from the module proxy)." >&2
	fi
fi
exit "$rc"
