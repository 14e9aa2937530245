package runner

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

// BenchmarkHTTPRun measures one HTTP run against a loopback receiver,
// connection reused: the runner's own overhead per run.
func BenchmarkHTTPRun(b *testing.B) {
	rc := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rc.Close()
	rn, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer rn.Close()
	r := testRun(httpJob(rc.URL), slidingDeadline{time.Minute})
	b.ResetTimer()
	for b.Loop() {
		if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
			b.Fatal(res.Detail)
		}
	}
}

// BenchmarkExecRun measures one exec run of /bin/true: starting the
// supervisor (this test binary), the job, and collecting the report.
func BenchmarkExecRun(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Supervisor = supervisorArgv()
	rn, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer rn.Close()
	r := testRun(execJob("true", "true"), slidingDeadline{time.Minute})
	b.ResetTimer()
	for b.Loop() {
		if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
			b.Fatal(res.Detail)
		}
	}
}

// BenchmarkHTTPFloorRequest sends the request the cluster benchmark's floor
// sends (bench/floor: the identity headers on a plain transport), against
// the same receiver as BenchmarkHTTPRun: the difference between the two is
// what a run costs beyond the request itself.
func BenchmarkHTTPFloorRequest(b *testing.B) {
	rc := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rc.Close()
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 30 * time.Second}
	tick := FormatTick(time.Unix(1_700_000_000, 0))
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, rc.URL, nil)
		if err != nil {
			b.Fatal(err)
		}
		h := req.Header
		h.Set("User-Agent", "shardcron")
		h.Set(HeaderCluster, "c")
		h.Set(HeaderJob, "job")
		h.Set(HeaderTick, tick)
		h.Set(HeaderShard, "1")
		h.Set(HeaderFencingToken, "1")
		h.Set(HeaderNode, "n")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
	}
}
