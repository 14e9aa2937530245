//go:build tools

// Package tools pins the commands vulncheck.sh builds: govulncheck, and
// indexdb, which turns the OSV entries that golang.org/x/vulndb carries in
// data/osv into a database govulncheck reads from a directory.
package tools

import (
	_ "golang.org/x/vuln/cmd/govulncheck"
	_ "golang.org/x/vulndb/cmd/indexdb"
)
