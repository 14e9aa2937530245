package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/cronspec"
)

// The memo answers as the schedule does, for instants before, inside and
// after the gap it remembers, across jobs, and for a schedule with no tick
// left.
func TestGapMemoAnswersAsTheSchedule(t *testing.T) {
	base := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
	var entries []*jobEntry
	for _, spec := range []string{"*/7 * * * * *", "0 0 1 1 *", "30 2 * * *", "@every 90s"} {
		sched, err := cronspec.Parse(spec, "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, &jobEntry{name: spec, sched: sched})
	}
	entries = append(entries, &jobEntry{name: "once", sched: cronspec.At(base.Add(time.Hour))})
	s := &Scheduler{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		e := entries[rng.IntN(len(entries))]
		if rng.IntN(4) == 0 { // mostly the same job again, as acquire asks
			e = entries[0]
		}
		at := base.Add(time.Duration(rng.Int64N(int64(400 * 24 * time.Hour))))
		if m := s.gap; m.e == e && !m.next.IsZero() { // at the remembered gap's ends, or inside it
			at = []time.Time{m.lo, m.next, m.next.Add(-1), m.lo.Add(-1), m.lo.Add(time.Duration(rng.Int64N(int64(m.next.Sub(m.lo)))))}[rng.IntN(5)]
		}
		if got, want := s.memoFor(e).Next(at), e.sched.Next(at); !got.Equal(want) {
			t.Fatalf("%s: memo Next(%v) = %v, the schedule says %v", e.name, at, got, want)
		}
	}
}

// BenchmarkAcquireYearly: what a joining replica's scheduler spends per job
// taking over shards of jobs due once a year (bench/jobsgen -yearly: "H H H
// H H *", applied a day ago, never fired, so no records): the catch-up that
// finds no missed tick and the claim timer armed. 64 shards of 1,000 jobs,
// acquired one after another as grants come, into a scheduler that already
// holds 64 such shards.
func BenchmarkAcquireYearly(b *testing.B) {
	const shards, perShard = 128, 1000
	since := time.Now().Add(-24 * time.Hour)
	jobs := make([]config.Job, 0, shards*perShard)
	for i := range shards * perShard {
		jobs = append(jobs, config.Job{Name: fmt.Sprintf("job-%07d", i), Schedule: "H H H H H *", Since: since,
			HTTP: &config.HTTPTarget{URL: "http://svc.internal/hook"}})
	}
	for b.Loop() {
		b.StopTimer()
		fs := newFakeStore(b)
		cfg := DefaultConfig()
		cfg.Cluster, cfg.Node, cfg.Shards = "c", "n", shards
		s, err := New(cfg, fs, &fakeRunner{behave: work(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		s.SetJobs(config.JobSet{Version: 1, Jobs: jobs})
		for sh := range shards { // before Run: its commits read them (a day's catch-up runs a few jobs)
			fs.fence[sh] = 2
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		grant := func(sh int) {
			s.Acquired(Grant{Shard: sh, Token: 2, Lost: context.Background(), Deadline: newDeadline(time.Hour), Contact: inContact})
		}
		for sh := range shards / 2 {
			grant(sh)
		}
		b.StartTimer()
		for sh := shards / 2; sh < shards; sh++ {
			grant(sh)
		}
		b.StopTimer()
		cancel()
		<-done
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*shards/2*perShard), "ns/job")
}
