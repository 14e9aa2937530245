package runner

import (
	"context"
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
