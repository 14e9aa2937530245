package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

// The per-second series, the lag by node and the phases: how a window's
// lag and CPU are broken down.

func TestLagByNode(t *testing.T) {
	l := newLedger()
	t0 := time.Unix(1_000_000, 0)
	rec := func(job, node string, lag time.Duration, token int64) {
		l.record(fire{Job: job, Tick: t0, Shard: 1, Token: token, Node: node, At: t0.Add(lag)})
	}
	rec("a", "n1", 10*time.Millisecond, 2)
	rec("b", "n1", 30*time.Millisecond, 2)
	rec("c", "n2", 5*time.Millisecond, 2)
	rec("a", "n2", 50*time.Millisecond, 2) // a repeat: its first receipt counts
	rec("d", "n3", 90*time.Millisecond, 1) // a stale token
	got := lagByNode(l.arrivals(t0, t0.Add(time.Second)))
	if len(got) != 2 || got["n1"].Max != 30 || got["n1"].P50 != 10 || got["n2"].Max != 5 {
		t.Errorf("lag by node = %+v, want n1 10/30 ms and n2 5 ms only", got)
	}
}

func TestSecondSeries(t *testing.T) {
	byOffset := map[int64]time.Duration{0: 12 * time.Millisecond, 2: 1500 * time.Microsecond, 5: time.Second}
	got := secondSeries(byOffset, 4)
	want := []float64{12, 0, 1.5, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("secondSeries = %v, want %v (offset 5 is outside a 4 s window)", got, want)
	}
}

func TestFoldPhases(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	sources := []phaseSource{{name: "a"}, {name: "idle"}}
	readings := []phaseReading{
		{at(10), []float64{1.000, 5}},
		{at(20), []float64{1.010, 5}}, // 10 ms of CPU, midpoint 15 ms: step 0
		{at(60), []float64{1.010, 5}},
		{at(70), []float64{1.030, 5}},   // 20 ms, midpoint 65 ms: step 1
		{at(2010), []float64{1.030, 7}}, // 2 s of idle, midpoint 1,010 ms: step 0 of the next second
	}
	p := foldPhases(sources, readings)
	if p.Seconds != 2 || p.StepMS != 50 || len(p.Rows) != 2 || len(p.Rows[0].MS) != 20 {
		t.Fatalf("fold shape: %+v", p)
	}
	// Averaged over the 2 s the readings span.
	if got := p.Rows[0].MS; math.Abs(got[0]-5) > 1e-9 || math.Abs(got[1]-10) > 1e-9 || got[2] != 0 {
		t.Errorf("row a = %v, want 5 ms in step 0 and 10 in step 1", got)
	}
	if got := p.Rows[1].MS[0]; math.Abs(got-1000) > 1e-9 {
		t.Errorf("idle step 0 = %v, want 1000", got)
	}
	if empty := foldPhases(sources, readings[:1]); empty.Seconds != 0 || empty.Rows[0].MS[0] != 0 {
		t.Errorf("one reading folds to nothing, got %+v", empty)
	}
}
