package shard

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// shardcron_ready says what /readyz says, read at scrape time.
func TestReadyMetricFollowsReady(t *testing.T) {
	reg := prometheus.NewRegistry()
	var notReady error
	if _, err := newMetrics(reg, 4, func() error { return notReady }); err != nil {
		t.Fatal(err)
	}
	want := func(v string) string {
		return "# HELP shardcron_ready 1 when this node can act: its session is valid, etcd has no NOSPACE alarm and its recent writes succeed (what /readyz says); keepalives alone succeeding never count.\n# TYPE shardcron_ready gauge\nshardcron_ready " + v + "\n"
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("1")), "shardcron_ready"); err != nil {
		t.Fatal(err)
	}
	notReady = ErrNoSpace
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want("0")), "shardcron_ready"); err != nil {
		t.Fatal(err)
	}
}
