package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardcron/shardcron/control"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/otlptest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/tracing"
)

var traceparentRE = regexp.MustCompile(`00-([0-9a-f]{32})-([0-9a-f]{16})-01`)

// startTracedServer starts a server of cluster whose OTEL_* environment is
// otel.
func startTracedServer(t *testing.T, etcd *etcdtest.Process, cluster string, otel ...string) *proc {
	t.Helper()
	p := startProcCmd(t, cluster, func(c *exec.Cmd) { c.Env = append(c.Env, otel...) },
		"server", "--cluster", cluster, "--node-id", "node-1", "--etcd-endpoints", etcd.Endpoint(),
		"--http-addr", "127.0.0.1:0", "--lease-ttl", opsTTL, "--shards", "8", "--drain-timeout", "2s")
	p.HTTPAddr(30 * time.Second)
	return p
}

// TestTracesThroughProcesses: a server with OTEL_EXPORTER_OTLP_ENDPOINT
// exports each run's span to a real OTLP/HTTP receiver with the run's
// attributes; the HTTP target reads the same trace id from traceparent, an
// exec job from TRACEPARENT; `history` and the API show it. A server whose
// collector is unreachable fires all the same and counts the spans it
// drops.
func TestTracesThroughProcesses(t *testing.T) {
	besideOthers(t)
	etcd := etcdtest.StartProcess(t)
	rc := otlptest.Start(t)

	var (
		mu      sync.Mutex
		parents []string // traceparent of each request the target got
	)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer target.Close()
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), parents...)
	}

	env := opsEnv(etcd, "traced")
	jobs := writeFile(t, "jobs.yaml", "jobs:\n"+
		"  - {name: traced-http, schedule: \"* * * * * *\", http: {url: \""+target.URL+"/\"}, timeout: 5s}\n"+
		"  - {name: traced-exec, schedule: \"* * * * * *\", exec: {command: [\"sh\", \"-c\", \"echo tp=$TRACEPARENT\"]}, timeout: 5s}\n")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	srv := startTracedServer(t, etcd, "traced", "OTEL_EXPORTER_OTLP_ENDPOINT="+rc.URL(),
		"OTEL_SERVICE_NAME=shardcron-test", "OTEL_BSP_SCHEDULE_DELAY=100")
	addr := srv.HTTPAddr(time.Second)

	// history (from etcd, flushed every 2 s) shows the trace id of a run of
	// each job, and the receiver has that run's span.
	var hist map[string]control.HistoryResult
	poll.MustEvery(t, procEvery, 60*time.Second, "a traced run of each job in history and at the receiver", poll.True(func() bool {
		hist = map[string]control.HistoryResult{}
		for _, job := range []string{"traced-http", "traced-exec"} {
			var h control.HistoryResult
			cliJSON(t, env, &h, "history", job)
			if len(h.Runs) == 0 || h.Runs[0].TraceID == "" || runSpan(rc, h.Runs[0].TraceID) == nil {
				return false
			}
			hist[job] = h
		}
		return true
	}))

	e := hist["traced-http"].Runs[0]
	span := runSpan(rc, e.TraceID)
	want := map[string]any{
		"shardcron.cluster": "traced", "shardcron.job": "traced-http", "shardcron.tick": e.Tick.UTC().Format(time.RFC3339Nano),
		"shardcron.shard": int64(hist["traced-http"].Shard), "shardcron.token": e.Token, "shardcron.node": "node-1",
		"shardcron.rerun": false, "shardcron.attempts": int64(1), "shardcron.outcome": "succeeded", "shardcron.target": "http",
	}
	for k, v := range want {
		if span.Attrs[k] != v {
			t.Errorf("run span %s = %#v, want %#v", k, span.Attrs[k], v)
		}
	}
	if _, ok := span.Attrs["shardcron.duration_ms"].(int64); !ok {
		t.Errorf("run span has no duration: %v", span.Attrs)
	}
	if span.Resource["service.name"] != "shardcron-test" || span.Resource["service.instance.id"] != "node-1" {
		t.Errorf("resource %v", span.Resource)
	}
	// The target saw that run's trace id, in the traceparent of the
	// attempt's span, a child of the run's.
	var attempt *otlptest.Span
	for _, tp := range seen() {
		m := traceparentRE.FindStringSubmatch(tp)
		if m != nil && m[1] == e.TraceID {
			attempt = spanByID(rc, m[2])
		}
	}
	if attempt == nil || attempt.Name != tracing.SpanAttempt || attempt.ParentID != span.SpanID {
		t.Errorf("no request with trace %s whose traceparent names the run's attempt span (%+v); traceparents seen: %q", e.TraceID, attempt, seen())
	}
	// The exec job printed its TRACEPARENT: the same trace.
	x := hist["traced-exec"].Runs[0]
	if m := traceparentRE.FindStringSubmatch(x.Output); m == nil || m[1] != x.TraceID {
		t.Errorf("exec run with trace %s printed %q", x.TraceID, x.Output)
	}
	// The API and the table show it too.
	var runs struct {
		Runs []struct {
			TraceID string `json:"trace_id"`
		} `json:"runs"`
	}
	body := httpGet(t, addr, "/api/v1/jobs/traced-http/runs")
	if err := json.Unmarshal([]byte(body), &runs); err != nil || len(runs.Runs) == 0 || runs.Runs[0].TraceID == "" {
		t.Errorf("/api/v1/jobs/traced-http/runs: %+v, %v", runs, err)
	}
	newOpenAPISchemas(t, dashboard.OpenAPI).check("traced runs", "#/components/schemas/History", []byte(body))
	if out, _, _ := runCLI(t, env, "history", "traced-http"); !strings.Contains(out, "TRACE") || !strings.Contains(out, e.TraceID) {
		t.Errorf("history table without the trace id %s:\n%s", e.TraceID, out)
	}

	// SIGTERM: the last spans are flushed and it exits 0 in time.
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(10 * time.Second); err != nil || code != 0 {
		t.Fatalf("SIGTERM: exit %d, %v", code, err)
	}
	if bad := rc.Bad(); len(bad) > 0 {
		t.Errorf("the receiver refused: %v", bad)
	}

	// An unreachable collector: runs still fire; the dropped spans are
	// counted.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	env = opsEnv(etcd, "untraced")
	if out, stderr, code := runCLI(t, env, "apply", "-f", jobs); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	before := len(seen())
	srv = startTracedServer(t, etcd, "untraced", "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+dead,
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_BSP_EXPORT_TIMEOUT=300")
	addr = srv.HTTPAddr(time.Second)
	poll.MustEvery(t, procEvery, 60*time.Second, "runs fire and dropped spans are counted", poll.True(func() bool {
		return len(seen()) >= before+3 && strings.Contains(httpGet(t, addr, "/metrics"), `shardcron_tracing_spans_dropped_total{reason="export_failed"}`) &&
			!strings.Contains(httpGet(t, addr, "/metrics"), `shardcron_tracing_spans_dropped_total{reason="export_failed"} 0`)
	}))
	srv.signal(syscall.SIGTERM)
	if code, err := srv.Wait(10 * time.Second); err != nil || code != 0 {
		t.Fatalf("SIGTERM with the collector unreachable: exit %d, %v", code, err)
	}
}

// runSpan returns the run span of trace id at rc, or nil.
func runSpan(rc *otlptest.Receiver, id string) *otlptest.Span {
	for _, s := range rc.Spans() {
		if s.Name == tracing.SpanRun && s.TraceID == id {
			return &s
		}
	}
	return nil
}

// spanByID returns the span with id at rc, or nil.
func spanByID(rc *otlptest.Receiver, id string) *otlptest.Span {
	for _, s := range rc.Spans() {
		if s.SpanID == id {
			return &s
		}
	}
	return nil
}

// An OTEL_* value tracing cannot follow stops server before anything
// starts, exit status 2, naming the variable.
func TestBadTracingConfigRefused(t *testing.T) {
	besideOthers(t)
	_, stderr, code := runCLI(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER=sometimes"},
		"server", "--etcd-endpoints", "http://127.0.0.1:1", "--http-addr", "127.0.0.1:0")
	if code != 2 || !strings.Contains(stderr, "OTEL_TRACES_SAMPLER") {
		t.Errorf("exit %d, want 2 naming OTEL_TRACES_SAMPLER:\n%s", code, stderr)
	}
}
