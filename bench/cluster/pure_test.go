package main

import (
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}, {0.1, time.Millisecond}} {
		if got := percentile(s, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v, want 0", got)
	}
	if got := percentile([]time.Duration{7}, 50); got != 7 {
		t.Errorf("p50 of one = %v, want 7", got)
	}
	st := summarise([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if st.P50 != 2 || st.Max != 3 || st.P99 != 3 {
		t.Errorf("summarise = %+v", st)
	}
}

func TestLedgerFencingMissedAndDuplicates(t *testing.T) {
	l := newLedger()
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	rec := func(job string, tick time.Time, shard int, token int64, recv time.Time) bool {
		return l.record(fire{Job: job, Tick: tick, Shard: shard, Token: token, At: recv})
	}
	if !rec("a", t0, 1, 10, at(50*time.Millisecond)) {
		t.Fatal("first fire rejected")
	}
	if !rec("b", t0, 2, 5, at(70*time.Millisecond)) {
		t.Fatal("another shard's lower token rejected: tokens are per shard")
	}
	if rec("a", at(time.Second), 1, 9, at(time.Second)) {
		t.Fatal("a token lower than the shard's highest was accepted")
	}
	if !rec("a", t0, 1, 11, at(3*time.Second)) {
		t.Fatal("a re-run under a newer token rejected")
	}
	if !rec("b", at(time.Second), 2, 5, at(time.Second+20*time.Millisecond)) {
		t.Fatal("an equal token rejected")
	}
	if l.missing([]string{"a", "b"}, t0, at(2*time.Second)) != 1 {
		t.Fatalf("missing = %d, want 1 (a's second tick)", l.missing([]string{"a", "b"}, t0, at(2*time.Second)))
	}
	w := l.window([]string{"a", "b"}, t0, at(2*time.Second), at(10*time.Second))
	if w.Expected != 4 || w.Received != 3 || w.Missed != 1 || w.Duplicates != 1 || w.Stale != 1 {
		t.Fatalf("window = %+v", w)
	}
	if w.MissedAt[1] != 1 {
		t.Errorf("missed at = %v, want second 1", w.MissedAt)
	}
	// Lag is the first accepted receipt minus the tick; the re-run's later
	// receipt does not count; the missed tick counts at its lower bound
	// (now minus the tick: 9 s).
	st := summarise(w.Lags)
	if st.Max != 9000 || st.P50 != 50 {
		t.Errorf("lags = %+v, want max 9000 ms, p50 50 ms", st)
	}
	l.completed(at(500 * time.Millisecond))
	l.completed(at(2 * time.Second))
	if n := l.completions(t0, at(2*time.Second)); n != 1 {
		t.Errorf("completions = %d, want 1 (the window is half-open)", n)
	}
}

const etcdMetrics = `# HELP etcd_debugging_mvcc_total_put_size_in_bytes The total size of put kv pairs seen by this member.
# TYPE etcd_debugging_mvcc_total_put_size_in_bytes gauge
etcd_debugging_mvcc_total_put_size_in_bytes 1.234567e+06
etcd_mvcc_put_total 42
etcd_disk_wal_write_bytes_total 9000
grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} 30
grpc_server_handled_total{grpc_code="FailedPrecondition",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} 2
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 7
weird_label{path="a}b c",x="1"} 5 1700000000000
`

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(etcdMetrics))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want []string
		v    float64
	}{
		{"etcd_debugging_mvcc_total_put_size_in_bytes", nil, 1234567},
		{"etcd_mvcc_put_total", nil, 42},
		{"grpc_server_handled_total", []string{`grpc_method="Txn"`}, 32},
		{"grpc_server_handled_total", nil, 39},
		{"weird_label", nil, 5},
		{"absent_total", nil, 0},
	} {
		if got := m.sum(c.name, c.want...); got != c.v {
			t.Errorf("%s%v = %v, want %v", c.name, c.want, got, c.v)
		}
	}
	if _, err := parseMetrics(strings.NewReader("novalue\n")); err == nil {
		t.Error("a line without a value parsed")
	}
}

func TestParseCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 50 ticks; the command
	// name holds a space and a parenthesis.
	stat := "4242 (shard cron) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 1000000 200 18446744073709551615"
	got, err := parseCPU(stat)
	if err != nil || got != 3.0 {
		t.Fatalf("parseCPU = %v, %v; want 3 s", got, err)
	}
	if _, err := parseCPU("garbage"); err == nil {
		t.Error("garbage parsed")
	}
}

func TestEvaluateTargets(t *testing.T) {
	res := results{
		Rate: []rateResult{
			{System: systemShardcron, FiresPerSec: 1000, Lag: lagStats{P99: 40}, PutBytes: 350, TxnRPCs: 0.04},
			{System: systemLeader, FiresPerSec: 1000, Lag: lagStats{P99: 100}},
		},
		Scale: []scaleResult{{Shards: 1, Replicas: 4, RunsPerSec: 80}, {Shards: 256, Replicas: 4, RunsPerSec: 300}},
	}
	_, targets := evaluate(res)
	if len(targets) != 4 {
		t.Fatalf("targets = %+v", targets)
	}
	for _, tg := range targets {
		if !tg.Pass {
			t.Errorf("target %q failed: %+v", tg.Name, tg)
		}
	}
	res.Rate[0].Duplicates = 1
	if _, targets := evaluate(res); targets[0].Pass {
		t.Error("lag target passed with a duplicate")
	}
}

func TestPlotDrawsBothPanels(t *testing.T) {
	svg := plot(results{
		Rate:  []rateResult{{System: systemShardcron, FiresPerSec: 200, Lag: lagStats{P50: 1, P99: 2}}},
		Scale: []scaleResult{{Shards: 256, Replicas: 1, RunsPerSec: 70}, {Shards: 256, Replicas: 4, RunsPerSec: 280}},
	})
	for _, want := range []string{"<svg", "Fire lag vs fires/s", "Runs/s vs replicas", "256 shard(s)", "shardcron p99", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
}
