package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/scheduler"
)

const (
	testParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testState  = "shardcron=1,vendor=x"
)

// A traced HTTP run sends its attempt's traceparent and tracestate,
// replacing the job's own; an untraced one leaves the job's alone.
func TestHTTPTraceContext(t *testing.T) {
	rc := newReceiver(t, nil)
	rn := newRunner(t, nil)
	job := httpJob(rc.URL)
	job.HTTP.Headers = map[string]string{"traceparent": "00-forged-forged-01", "Tracestate": "forged=1"}
	r := testRun(job, slidingDeadline{time.Minute})
	r.Trace = scheduler.TraceContext{Parent: testParent, State: testState}
	if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	r.Trace = scheduler.TraceContext{Parent: testParent}
	if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	r.Trace = scheduler.TraceContext{}
	if res := rn.Run(context.Background(), r); res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s)", res.Status, res.Detail)
	}
	reqs, _ := rc.requests()
	for i, want := range [][2]string{{testParent, testState}, {testParent, ""}, {"00-forged-forged-01", "forged=1"}} {
		h := reqs[i].Header
		if g := h.Values(HeaderTraceparent); len(g) != 1 || g[0] != want[0] {
			t.Errorf("request %d: traceparent %q, want %q", i, g, want[0])
		}
		if g := h.Values(HeaderTracestate); strings.Join(g, ",") != want[1] {
			t.Errorf("request %d: tracestate %q, want %q", i, g, want[1])
		}
	}
}

// A traced exec run gets TRACEPARENT and TRACESTATE, replacing the job's
// own.
func TestExecTraceContext(t *testing.T) {
	rn := newRunner(t, nil)
	job := execJob("env-dump", "env")
	job.Env = map[string]string{EnvTracestate: "forged=1"}
	r := testRun(job, slidingDeadline{time.Minute})
	r.Trace = scheduler.TraceContext{Parent: testParent}
	res := rn.Run(context.Background(), r)
	if res.Status != scheduler.StatusSucceeded {
		t.Fatalf("status %s (%s): %s", res.Status, res.Detail, res.Output)
	}
	if !strings.Contains(res.Output, EnvTraceparent+"="+testParent+"\n") {
		t.Errorf("no %s=%s in\n%s", EnvTraceparent, testParent, res.Output)
	}
	if strings.Contains(res.Output, EnvTracestate+"=") {
		t.Errorf("the job's %s survived a traced run:\n%s", EnvTracestate, res.Output)
	}
	rn.nextPids(t)
}
