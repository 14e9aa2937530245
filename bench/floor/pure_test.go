package main

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

func TestShareCoversEveryJobOnce(t *testing.T) {
	for _, c := range []struct{ jobs, parts int }{{10, 3}, {1, 3}, {0, 2}, {9, 3}, {100000, 3}} {
		seen := make([]int, c.jobs)
		for part := range c.parts {
			for _, i := range share(c.jobs, part, c.parts) {
				if i%c.parts != part {
					t.Fatalf("%d jobs, %d parts: job %d in part %d", c.jobs, c.parts, i, part)
				}
				seen[i]++
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("%d jobs, %d parts: job %d in %d parts", c.jobs, c.parts, i, n)
			}
		}
	}
}

// drainUntil collects every tick popDue hands out up to until.
func drainUntil(p *plan, until time.Time) map[string][]time.Time {
	got := map[string][]time.Time{}
	var last time.Time
	p.popDue(until, func(job string, tick time.Time) {
		if tick.Before(last) {
			panic("ticks out of order")
		}
		last = tick
		got[job] = append(got[job], tick)
	})
	return got
}

func TestPlanEverySecond(t *testing.T) {
	from := time.Date(2026, 12, 1, 12, 0, 0, 500_000_000, time.UTC)
	names := []string{jobName("r", 0), jobName("r", 3)}
	p, err := newPlan(names, "* * * * * *", "UTC", from)
	if err != nil {
		t.Fatal(err)
	}
	if at, _ := p.first(); !at.Equal(from.Truncate(time.Second).Add(time.Second)) {
		t.Fatalf("first = %v", at)
	}
	got := drainUntil(p, from.Add(3*time.Second))
	for _, n := range names {
		if len(got[n]) != 3 {
			t.Fatalf("%s: %v, want 3 ticks", n, got[n])
		}
		for k, tick := range got[n] {
			if want := time.Date(2026, 12, 1, 12, 0, 1+k, 0, time.UTC); !tick.Equal(want) {
				t.Errorf("%s tick %d = %v, want %v", n, k, tick, want)
			}
		}
	}
	if at, _ := p.first(); !at.Equal(time.Date(2026, 12, 1, 12, 0, 4, 0, time.UTC)) {
		t.Errorf("next after the drain = %v", at)
	}
}

// With H the floor's tick of each job is the one shardcron computes: the
// top of the minute plus the job's hashed second.
func TestPlanHashedMatchesCronspec(t *testing.T) {
	from := time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC)
	names := make([]string, 200)
	for i := range names {
		names[i] = jobName("b", i)
	}
	p, err := newPlan(names, "H 1 12 1 12 *", "UTC", from)
	if err != nil {
		t.Fatal(err)
	}
	got := drainUntil(p, from.Add(2*time.Minute))
	minute := time.Date(2026, 12, 1, 12, 1, 0, 0, time.UTC)
	spread := map[int]bool{}
	for _, n := range names {
		off := cronspec.HashOffset(n, 0, 60)
		spread[off] = true
		if len(got[n]) != 1 || !got[n][0].Equal(minute.Add(time.Duration(off)*time.Second)) {
			t.Fatalf("%s: %v, want one tick at %v + %d s", n, got[n], minute, off)
		}
	}
	if len(spread) < 30 {
		t.Errorf("200 jobs hashed onto only %d seconds", len(spread))
	}
	if _, ok := p.first(); !ok {
		t.Error("a yearly schedule ran out after one tick")
	}
}
