package runner

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/scheduler"
)

// Output cut at its bound is counted, by kind; output within it is not.
func TestOutputTruncatedCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		n := 10
		if r.URL.Path == "/big" {
			n = 10000
		}
		_, _ = io.WriteString(w, strings.Repeat("x", n))
	})
	rn := newRunner(t, func(c *Config) { c.MaxResponseBytes, c.MaxOutputBytes, c.Registerer = 100, 100, reg })
	count := func(kind string) float64 {
		return testutil.ToFloat64(rn.met.truncated.WithLabelValues(kind))
	}
	for _, path := range []string{"/small", "/big", "/small"} {
		if res := rn.Run(context.Background(), testRun(httpJob(rc.URL+path), slidingDeadline{time.Minute})); res.Status != scheduler.StatusSucceeded {
			t.Fatalf("%s: %s (%s)", path, res.Status, res.Detail)
		}
	}
	for _, n := range []string{"50", "500"} {
		res := rn.Run(context.Background(), testRun(execJob("out", "head", "-c", n, "/dev/zero"), slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusSucceeded {
			t.Fatalf("exec %s bytes: %s (%s)", n, res.Status, res.Detail)
		}
	}
	if count("http") != 1 || count("exec") != 1 {
		t.Fatalf("truncated: http %v, exec %v; want 1 and 1", count("http"), count("exec"))
	}
	if n, err := testutil.GatherAndCount(reg, "shardcron_runner_output_truncated_total"); err != nil || n != 2 {
		t.Fatalf("%d series registered (%v), want 2", n, err)
	}
}
