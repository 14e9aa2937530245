//go:build tools

// Package tools pins a module used only through `go build` of another
// module's command: the real etcd binary of the multi-process suites
// (`go build -o bin/etcd go.etcd.io/etcd/server/v3`), so `go mod tidy`
// keeps it.
package tools

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
)
