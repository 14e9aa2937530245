package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/cronspec"
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

// The busiest node's share counts first accepted receipts of the window's
// ticks by node, against an even split: a repeat, a stale token or a tick
// outside the window is not work the node was given.
func TestBusiestShare(t *testing.T) {
	l := newLedger()
	t0 := time.Unix(1_000_000, 0)
	rec := func(job, node string, tick time.Time, token int64) {
		l.record(fire{Job: job, Tick: tick, Shard: 1, Token: token, Node: node, At: t0.Add(time.Second)})
	}
	rec("a", "n1", t0, 2)
	rec("b", "n1", t0, 2)
	rec("c", "n2", t0, 2)
	rec("d", "n3", t0, 2)
	rec("a", "n1", t0, 2)                  // a repeat
	rec("e", "n1", t0, 1)                  // a stale token
	rec("f", "n1", t0.Add(time.Minute), 2) // outside the window
	if got := busiestShare(l.arrivals(t0, t0.Add(time.Second)), 3); got != 1.5 {
		t.Errorf("busiest share = %v, want 1.5 (2 of 4 ticks, 3 nodes)", got)
	}
	if got := busiestShare(l.arrivals(t0.Add(time.Hour), t0.Add(2*time.Hour)), 3); got != 0 {
		t.Errorf("busiest share of an empty window = %v, want 0", got)
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

func TestEvaluateFloorTargets(t *testing.T) {
	res := results{
		Rate: []rateResult{
			{System: systemShardcron, FiresPerSec: 200, Lag: lagStats{P99: 30}},
			{System: systemFloor, FiresPerSec: 200, Lag: lagStats{P99: 10}},
			{System: systemShardcron, FiresPerSec: 1000, Lag: lagStats{P99: 60}, PutBytes: 300, TxnRPCs: 0.03},
			{System: systemFloor, FiresPerSec: 1000, Lag: lagStats{P99: 50}},
			{System: systemShardcron, FiresPerSec: 10000, Lag: lagStats{P99: 900}},
			{System: systemFloor, FiresPerSec: 10000, Lag: lagStats{P99: 300}},
		},
		Burst: []burstResult{
			{System: systemShardcron, Mode: burstPlain, Jobs: 10, Received: 10, Lag: lagStats{P99: 140}},
			{System: systemFloor, Mode: burstPlain, Jobs: 10, Received: 10, Lag: lagStats{P99: 100}},
			{System: systemShardcron, Mode: burstHashed, Jobs: 10, Received: 9, Missed: 1, Lag: lagStats{P99: 10}},
			{System: systemFloor, Mode: burstHashed, Jobs: 10, Received: 10, Lag: lagStats{P99: 10}},
		},
	}
	ratios, targets := evaluate(res)
	got := map[string]bool{}
	for _, tg := range targets {
		got[tg.Name] = tg.Pass
	}
	want := map[string]bool{
		"lag p99 at 1000 fires/s ≤ 1.5× floor, 0 missed, 0 duplicates":                          true,
		"lag p99 at 10000 fires/s ≤ 1.5× floor, 0 missed, 0 duplicates":                         false, // 3×
		"etcd bytes put per fire at 1,000 fires/s":                                              true,
		"etcd transactions per fire at 1,000 fires/s":                                           true,
		"burst of 10 jobs (plain): all delivered, 0 missed, 0 duplicates, lag p99 ≤ 1.5× floor": true,
		"burst of 10 jobs (H): all delivered, 0 missed, 0 duplicates, lag p99 ≤ 1.5× floor":     false, // one missed
	}
	if len(got) != len(want) {
		t.Errorf("targets = %v, want %v (no floor target at 200 fires/s)", got, want)
	}
	for name, pass := range want {
		if p, ok := got[name]; !ok || p != pass {
			t.Errorf("target %q: pass %v (present %v), want %v", name, p, ok, pass)
		}
	}
	n := 0
	for _, r := range ratios {
		if r.Versus == systemFloor {
			n++
			if r.What == "lag p99" && r.FiresPerSec == 200 && r.Ratio != 3 {
				t.Errorf("200/s lag p99 ratio = %v, want 3", r.Ratio)
			}
		}
	}
	if n != 3*5 {
		t.Errorf("%d floor ratios, want 5 measures at 3 rates", n)
	}
}

func TestBurstScheduleAndTicks(t *testing.T) {
	now := time.Date(2026, 12, 1, 23, 59, 10, 0, time.UTC)
	minute := burstMinute(now, 30*time.Second)
	if want := time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC).Add(time.Minute); !minute.Equal(want) {
		t.Fatalf("burstMinute = %v, want %v", minute, want)
	}
	if m := burstMinute(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), 0); m.Second() != 0 || m.Minute() != 0 {
		t.Errorf("a top of a minute is its own burst minute, got %v", m)
	}
	if got := burstSpec(burstPlain, minute); got != "0 0 0 2 12 *" {
		t.Errorf("plain spec = %q", got)
	}
	if got := burstSpec(burstHashed, minute); got != "H 0 0 2 12 *" {
		t.Errorf("H spec = %q", got)
	}
	jobs := []string{"b-00000", "b-00001", "b-00002", "b-00003"}
	plain, err := burstTicks(burstSpec(burstPlain, minute), jobs, minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, tk := range plain {
		if !tk.Equal(minute) {
			t.Errorf("plain tick of %s = %v, want the minute %v", jobs[i], tk, minute)
		}
	}
	hashed, err := burstTicks(burstSpec(burstHashed, minute), jobs, minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, tk := range hashed {
		if want := minute.Add(time.Duration(cronspec.HashOffset(jobs[i], 0, 60)) * time.Second); !tk.Equal(want) {
			t.Errorf("H tick of %s = %v, want %v", jobs[i], tk, want)
		}
	}
}

func TestLedgerTicks(t *testing.T) {
	l := newLedger()
	t0 := time.Unix(2_000_000, 0)
	jobs := []string{"a", "b", "c"}
	ticks := []time.Time{t0, t0.Add(5 * time.Second), t0}
	l.record(fire{Job: "a", Tick: t0, Token: 1, At: t0.Add(40 * time.Millisecond)})
	l.record(fire{Job: "a", Tick: t0, Token: 1, At: t0.Add(90 * time.Millisecond)})
	l.record(fire{Job: "b", Tick: t0.Add(5 * time.Second), Token: 1, At: t0.Add(5*time.Second + 10*time.Millisecond)})
	l.record(fire{Job: "c", Tick: t0.Add(time.Second), Token: 1, At: t0.Add(time.Second)}) // not the tick asked
	if n := l.missingTicks(jobs, ticks); n != 1 {
		t.Fatalf("missingTicks = %d, want 1 (c)", n)
	}
	st := l.ticks(jobs, ticks, t0.Add(20*time.Second))
	if st.Received != 2 || st.Missed != 1 || st.Duplicates != 1 {
		t.Fatalf("ticks = %+v", st)
	}
	if !st.LastReceipt.Equal(t0.Add(5*time.Second + 10*time.Millisecond)) {
		t.Errorf("last receipt = %v", st.LastReceipt)
	}
	if s := summarise(st.Lags); s.Max != 20000 || s.P50 != 40 {
		t.Errorf("lags = %+v, want max 20000 ms (c at its lower bound), p50 40 ms", s)
	}
}

func TestAddrFromLogLine(t *testing.T) {
	for line, want := range map[string]string{
		`time=2026-12-01T18:00:00Z level=INFO msg="http listening" addr=127.0.0.1:41234`:            "127.0.0.1:41234",
		`{"time":"2026-12-01T18:00:00Z","level":"INFO","msg":"http listening","addr":"[::1]:8080"}`: "[::1]:8080",
	} {
		m := addrRE.FindStringSubmatch(line)
		if m == nil || m[1] != want {
			t.Errorf("%s: got %v, want %s", line, m, want)
		}
	}
}

func TestBinariesFollowScenarios(t *testing.T) {
	c := config{shardcronBin: "s", etcdBin: "e", leaderBin: "l", floorBin: "f",
		systems: []string{systemShardcron, systemFloor}, scenarios: map[string]bool{"burst": true}}
	got := c.binaries()
	slices.Sort(got)
	if !slices.Equal(got, []string{"e", "f", "s"}) {
		t.Errorf("binaries = %v, want etcd, floor, shardcron", got)
	}
	c.systems, c.scenarios = []string{systemLeader}, map[string]bool{"scaleout": true}
	if got := c.binaries(); slices.Contains(got, "l") || !slices.Contains(got, "s") {
		t.Errorf("scale-out alone: binaries = %v, want shardcron and no leader", got)
	}
}

func TestPlotDrawsBurstAndFloor(t *testing.T) {
	svg := plot(results{
		Rate: []rateResult{{System: systemShardcron, FiresPerSec: 1000, Lag: lagStats{P50: 20, P99: 60}},
			{System: systemFloor, FiresPerSec: 1000, Lag: lagStats{P50: 10, P99: 40}}},
		Burst: []burstResult{{System: systemShardcron, Mode: burstPlain, Jobs: 100, Lag: lagStats{P99: 900}, DeliverAllMs: 1200},
			{System: systemFloor, Mode: burstHashed, Jobs: 100, Lag: lagStats{P99: 5}, DeliverAllMs: 59000}},
	})
	for _, want := range []string{"floor p99", "Burst of 100 jobs", "shardcron lag p99", "floor deliver all", `width="1440"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
	if strings.Contains(svg, "leader p99") {
		t.Error("plot draws a leader that was not measured")
	}
}

// With rounds, a lag target takes the median of the rounds' ratios, each
// round's shardcron against the peer of the same round, and fails on a
// missed tick in any round.
func TestEvaluateRounds(t *testing.T) {
	cell := func(sys string, round int, p99 float64) rateResult {
		return rateResult{System: sys, FiresPerSec: 1000, Round: round, Lag: lagStats{P99: p99}, PutBytes: 300, TxnRPCs: 0.03}
	}
	res := results{Rate: []rateResult{
		cell(systemShardcron, 1, 80), cell(systemLeader, 1, 100), // 0.8: a slow spell for shardcron
		cell(systemShardcron, 2, 40), cell(systemLeader, 2, 100), // 0.4
		cell(systemShardcron, 3, 90), cell(systemLeader, 3, 200), // 0.45
	}}
	ratios, targets := evaluate(res)
	lag := targets[0]
	if lag.Name != "lag p99 at 1000 fires/s ≤ 0.5× leader, 0 missed, 0 duplicates" || lag.Value != 0.45 || !lag.Pass {
		t.Errorf("lag target = %+v, want the median 0.45, passing", lag)
	}
	if !strings.Contains(lag.Note, "median of 3 rounds (0.80, 0.40, 0.45)") {
		t.Errorf("note %q does not give each round's ratio", lag.Note)
	}
	var p99 []float64
	for _, r := range ratios {
		if r.What == "lag p99" {
			p99 = append(p99, r.Ratio)
		}
	}
	if !slices.Equal(p99, []float64{0.8, 0.4, 0.45}) {
		t.Errorf("lag p99 ratios by round = %v, want 0.8, 0.4, 0.45", p99)
	}
	res.Rate[2].Missed = 1 // round 2's shardcron
	if _, targets := evaluate(res); targets[0].Pass {
		t.Error("lag target passed with a tick missed in one round")
	}
	if got := median([]float64{3, 1, 4, 2}); got != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", got)
	}
}
