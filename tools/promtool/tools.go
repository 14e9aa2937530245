//go:build tools

// Package promtool only records the promtool dependency; build it with
// `go build -tags remove_all_sd -o ../../bin/promtool
// github.com/prometheus/prometheus/cmd/promtool` from this directory (make
// promtool does).
package promtool

import _ "github.com/prometheus/prometheus/cmd/promtool"
