package tracing

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/internal/otlptest"
	"github.com/shardcron/shardcron/internal/poll"
	"github.com/shardcron/shardcron/scheduler"
)

// clearOTEL unsets every OTEL_* variable the test process may have
// inherited, so each test says exactly what it configures.
func clearOTEL(t *testing.T) {
	for _, n := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"} {
		t.Setenv(n, "")
	}
}

func testRun() scheduler.Run {
	return scheduler.Run{
		Cluster: "prod-eu", Node: "node-7", Shard: 517, Token: 90210, Rerun: true, Trigger: "7f3a9c",
		Tick: time.Date(2026, 12, 1, 12, 0, 5, 0, time.UTC),
		Job:  config.Job{Name: "invoice-sweep", HTTP: &config.HTTPTarget{URL: "http://x", Method: "PUT"}},
		Item: config.Item{Index: 2, Count: 3, Name: "globex"},
	}
}

func setup(t *testing.T, reg prometheus.Registerer) *Tracing {
	t.Helper()
	tr, err := Setup(context.Background(), Options{Node: "node-7", Version: "v9.9.9", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

var traceparent = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$`)

// Without an endpoint tracing is off: no Tracer, counters registered all
// the same; OTEL_SDK_DISABLED and OTEL_TRACES_EXPORTER=none turn it off
// with an endpoint.
func TestOffUnlessConfigured(t *testing.T) {
	for _, env := range [][2]string{
		{},
		{"OTEL_SDK_DISABLED", "true"},
		{"OTEL_TRACES_EXPORTER", "none"},
	} {
		clearOTEL(t)
		if env[0] != "" {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
			t.Setenv(env[0], env[1])
		}
		reg := prometheus.NewRegistry()
		tr := setup(t, reg)
		if tr.Enabled() || tr.Tracer() != nil {
			t.Errorf("%v: tracing on", env)
		}
		if n, err := testutil.GatherAndCount(reg, "shardcron_tracing_spans_dropped_total"); err != nil || n != 3 {
			t.Errorf("%v: %d dropped series (%v), want 3", env, n, err)
		}
	}
	var off *Tracing
	if off.Tracer() != nil || off.Shutdown(context.Background()) != nil {
		t.Error("a nil Tracing is not off")
	}
}

// A configuration shardcron cannot follow is refused, naming the variable.
func TestBadConfig(t *testing.T) {
	for _, c := range [][2]string{
		{"OTEL_SDK_DISABLED", "maybe"},
		{"OTEL_TRACES_EXPORTER", "zipkin"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_TRACES_SAMPLER_ARG", "2"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0"},
		{"OTEL_BSP_SCHEDULE_DELAY", "5s"},
	} {
		clearOTEL(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
		t.Setenv("OTEL_TRACES_SAMPLER", "traceidratio")
		t.Setenv(c[0], c[1])
		tr, err := Setup(context.Background(), Options{})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c[0]) {
			t.Errorf("%s=%s: %v, want ErrConfig naming it", c[0], c[1], err)
		}
		_ = tr.Shutdown(context.Background())
	}
}

// A run's span and its attempts' spans reach a real OTLP/HTTP receiver with
// the run's attributes, the attempt's traceparent names the attempt's span
// in the run's trace, and history gets that trace id.
func TestSpansReachCollector(t *testing.T) {
	clearOTEL(t)
	rc := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL())
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	reg := prometheus.NewRegistry()
	tr := setup(t, reg)
	if !tr.Enabled() {
		t.Fatal("tracing off with an endpoint")
	}
	r := testRun()
	span := tr.Tracer().StartRun(r)
	var parents []string
	for n, st := range []scheduler.Status{scheduler.StatusFailed, scheduler.StatusSucceeded} {
		r.Attempt = n + 1
		tc, end := span.StartAttempt(r)
		parents = append(parents, tc.Parent)
		end(scheduler.Result{Status: st, Detail: "HTTP " + string(st)})
	}
	span.End(scheduler.Result{Status: scheduler.StatusSucceeded, Detail: "HTTP 200 OK"}, 2, 1500*time.Millisecond)
	id := span.TraceID()
	if len(id) != 32 {
		t.Fatalf("trace id %q", id)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rc.Spans()
	if len(spans) != 3 || len(rc.Bad()) != 0 {
		t.Fatalf("received %+v (refused %v), want 3 spans", spans, rc.Bad())
	}
	var run otlptest.Span
	for _, s := range spans {
		if s.Name == SpanRun {
			run = s
		}
	}
	want := map[string]any{
		"shardcron.cluster": "prod-eu", "shardcron.job": "invoice-sweep", "shardcron.tick": "2026-12-01T12:00:05Z",
		"shardcron.shard": int64(517), "shardcron.token": int64(90210), "shardcron.node": "node-7",
		"shardcron.rerun": true, "shardcron.trigger": "7f3a9c", "shardcron.target": "http",
		"shardcron.attempts": int64(2), "shardcron.outcome": "succeeded", "shardcron.duration_ms": int64(1500),
		"shardcron.detail": "HTTP 200 OK", "shardcron.item": "globex",
	}
	for k, v := range want {
		if run.Attrs[k] != v {
			t.Errorf("run span %s = %#v, want %#v", k, run.Attrs[k], v)
		}
	}
	if run.TraceID != id || run.ParentID != "" || run.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("run span %+v, want a root in trace %s", run, id)
	}
	for k, v := range map[string]any{"service.name": "shardcron", "service.instance.id": "node-7",
		"service.version": "v9.9.9", "deployment.environment.name": "test"} {
		if run.Resource[k] != v {
			t.Errorf("resource %s = %#v, want %#v", k, run.Resource[k], v)
		}
	}
	n := 0
	for _, s := range spans {
		if s.Name != SpanAttempt {
			continue
		}
		n++
		a := s.Attrs["shardcron.attempt"].(int64)
		m := traceparent.FindStringSubmatch(parents[a-1])
		if m == nil || m[1] != id || m[2] != s.SpanID || m[3] != "01" {
			t.Errorf("attempt %d: traceparent %q, want trace %s span %s sampled", a, parents[a-1], id, s.SpanID)
		}
		if s.TraceID != id || s.ParentID != run.SpanID || s.Kind != tracepb.Span_SPAN_KIND_CLIENT || s.Attrs["http.request.method"] != "PUT" {
			t.Errorf("attempt span %+v, want a client child of %s", s, run.SpanID)
		}
		if failed := a == 1; failed != (s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR) {
			t.Errorf("attempt %d: status %v", a, s.Status)
		}
	}
	if n != 2 {
		t.Errorf("%d attempt spans, want 2", n)
	}
	if got := counter(t, reg, "shardcron_tracing_spans_exported_total", ""); got != 3 {
		t.Errorf("exported %v, want 3", got)
	}
}

// A run not sampled still carries its trace context (flags 00), exports
// nothing and records no trace id.
func TestNotSampled(t *testing.T) {
	clearOTEL(t)
	rc := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL())
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tr := setup(t, nil)
	r := testRun()
	span := tr.Tracer().StartRun(r)
	r.Attempt = 1
	tc, end := span.StartAttempt(r)
	end(scheduler.Result{Status: scheduler.StatusSucceeded})
	span.End(scheduler.Result{Status: scheduler.StatusSucceeded}, 1, time.Second)
	if m := traceparent.FindStringSubmatch(tc.Parent); m == nil || m[3] != "00" {
		t.Errorf("traceparent %q, want one flagged not sampled", tc.Parent)
	}
	if span.TraceID() != "" {
		t.Errorf("trace id %q recorded for a run not sampled", span.TraceID())
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := rc.Spans(); len(s) != 0 {
		t.Errorf("%d spans exported, want none", len(s))
	}
}

// An unreachable collector costs runs nothing but the counter: spans end
// at once, exports fail, and each failed span is counted.
func TestUnreachableCollector(t *testing.T) {
	clearOTEL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+dead)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "200")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
	reg := prometheus.NewRegistry()
	tr := setup(t, reg)
	r := testRun()
	for range 50 {
		span := tr.Tracer().StartRun(r)
		span.End(scheduler.Result{Status: scheduler.StatusSucceeded}, 1, 0)
	}
	poll.Must(t, 10*time.Second, "a failed export counted", poll.True(func() bool {
		return counter(t, reg, "shardcron_tracing_spans_dropped_total", dropExportFailed) > 0
	}))
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Log("shutdown:", err)
	}
	total := counter(t, reg, "shardcron_tracing_spans_dropped_total", dropExportFailed) +
		counter(t, reg, "shardcron_tracing_spans_dropped_total", dropQueueFull) +
		counter(t, reg, "shardcron_tracing_spans_dropped_total", dropShutdown)
	if total != 50 || counter(t, reg, "shardcron_tracing_spans_exported_total", "") != 0 {
		t.Errorf("%v spans counted dropped, want all 50", total)
	}
	if counter(t, reg, "shardcron_tracing_spans_dropped_total", dropQueueFull) == 0 {
		t.Error("a queue of 4 took 50 spans without dropping one")
	}
}

// counter reads a counter (with the reason label when reason is set) from
// reg.
func counter(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if reason == "" || len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
