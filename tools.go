//go:build tools

// Package tools pins modules that are used only through `go build` of another
// module's command (the etcd binary for multi-process tests), so that
// `go mod tidy` keeps them.
package tools

import (
	_ "github.com/buraksezer/consistent"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/robfig/cron/v3"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/sys/unix"
	_ "pgregory.net/rapid"
)
