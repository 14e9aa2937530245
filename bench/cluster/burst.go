package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

// The burst scenario's two schedules: every job due at second 0 of one
// minute, or at its own hashed second of that minute (H, cronspec/hash.go).
const (
	burstPlain  = "plain"
	burstHashed = "H"
)

// burstResult is one burst of one system: every job due once, at one
// minute (plain) or spread over it by H.
type burstResult struct {
	System   string    `json:"system"`
	Mode     string    `json:"mode"`     // plain or H
	Schedule string    `json:"schedule"` // every job's cron spec (UTC)
	Jobs     int       `json:"jobs"`
	Replicas int       `json:"replicas"`
	Minute   time.Time `json:"minute"` // the instant of the plain burst, the start of the H one
	// SpanS is the last tick minus the first: 0 plain, up to 59 s with H.
	SpanS float64 `json:"ticks_span_s"`
	// DeliverAllMs is the last first receipt minus the first tick: the
	// time to deliver all (a lower bound, now minus the first tick, when
	// some tick never came).
	DeliverAllMs float64  `json:"deliver_all_ms"`
	Lag          lagStats `json:"lag"`
	Received     int      `json:"received"`
	Missed       int      `json:"missed"`
	Duplicates   int      `json:"duplicates"`
	Stale        int      `json:"stale_rejected"`
	// ReadyS is from the start of the apply until every replica ran the
	// whole set (shardcron); MarginS what was left of the lead then.
	ReadyS  float64 `json:"ready_s,omitempty"`
	MarginS float64 `json:"margin_s"`
}

// burstMinute is the first top of a minute at least lead after now.
func burstMinute(now time.Time, lead time.Duration) time.Time {
	t := now.Add(lead).UTC()
	m := t.Truncate(time.Minute)
	if m.Before(t) {
		m = m.Add(time.Minute)
	}
	return m
}

// burstSpec is the schedule of mode at minute (UTC): due once a year, so
// the burst is the only tick in the run.
func burstSpec(mode string, minute time.Time) string {
	sec := "0"
	if mode == burstHashed {
		sec = "H"
	}
	return fmt.Sprintf("%s %d %d %d %d *", sec, minute.Minute(), minute.Hour(), minute.Day(), int(minute.Month()))
}

// burstTicks returns each job's tick of spec at or after minute, as
// shardcron computes it (cronspec.ParseJob resolves H from the job's name).
func burstTicks(spec string, jobs []string, minute time.Time) ([]time.Time, error) {
	out := make([]time.Time, len(jobs))
	for i, j := range jobs {
		s, err := cronspec.ParseJob(spec, "UTC", j)
		if err != nil {
			return nil, err
		}
		out[i] = s.Next(minute.Add(-time.Nanosecond))
	}
	return out, nil
}

// runBurst runs one burst of system in mode: start, wait for the burst's
// minute and every tick of it, read the ledger, stop.
func (b *bench) runBurst(ctx context.Context, system, mode string) (burstResult, error) {
	led := newLedger()
	b.sink.setLedger(led)
	s := spec{System: system, Name: fmt.Sprintf("b-%s-%s", strings.ToLower(mode), system), Replicas: b.cfg.replicas,
		Jobs: b.cfg.burstJobs, Shards: b.cfg.shards, MaxRuns: b.cfg.maxRuns, Path: "/fire", TTL: b.cfg.ttl,
		Deadline: b.cfg.burstDrain}
	r := burstResult{System: system, Mode: mode, Jobs: s.Jobs, Replicas: s.Replicas}
	// The floor is ready within a second of its start, so its minute is
	// chosen first; shardcron's once its replicas are up, with the lead
	// left for the apply.
	if system == systemFloor {
		r.Minute = burstMinute(time.Now(), 5*time.Second)
		s.Schedule = burstSpec(mode, r.Minute)
	}
	c, err := b.launch(ctx, s)
	if c != nil {
		defer b.stop(ctx, c)
	}
	if err != nil {
		return r, fmt.Errorf("%s: start: %w", s.Name, err)
	}
	if system == systemShardcron {
		r.Minute = burstMinute(time.Now(), b.cfg.burstLead)
		c.Schedule = burstSpec(mode, r.Minute)
		start := time.Now()
		if err := b.apply(ctx, c); err != nil {
			return r, err
		}
		if err := pollUntil(ctx, 200*time.Millisecond, time.Until(r.Minute), func() error { return b.loaded(ctx, c) }); err != nil {
			return r, fmt.Errorf("%s: the job set not run by every replica before the burst's minute (raise -burst-lead): %w", s.Name, err)
		}
		r.ReadyS = time.Since(start).Seconds()
	}
	r.Schedule = c.schedule()
	r.MarginS = time.Until(r.Minute).Seconds()
	if r.MarginS < 0 {
		return r, fmt.Errorf("%s: ready %.1f s after the burst's minute (raise -burst-lead)", s.Name, -r.MarginS)
	}
	ticks, err := burstTicks(r.Schedule, c.jobs, r.Minute)
	if err != nil {
		return r, err
	}
	first, last := ticks[0], ticks[0]
	for _, t := range ticks {
		first, last = minTime(first, t), maxTime(last, t)
	}
	if err := waitUntil(ctx, last); err != nil {
		return r, err
	}
	_ = pollUntil(ctx, 100*time.Millisecond, b.cfg.burstDrain, func() error {
		if n := led.missingTicks(c.jobs, ticks); n > 0 {
			return fmt.Errorf("%d ticks not received", n)
		}
		return nil
	})
	now := time.Now()
	st := led.ticks(c.jobs, ticks, now)
	r.SpanS = last.Sub(first).Seconds()
	r.Lag = summarise(st.Lags)
	r.Received, r.Missed, r.Duplicates, r.Stale = st.Received, st.Missed, st.Duplicates, st.Stale
	end := st.LastReceipt
	if st.Missed > 0 {
		end = now
	}
	r.DeliverAllMs = float64(end.Sub(first).Microseconds()) / 1000
	return r, nil
}

// loaded reports nil when every replica of c runs the whole job set: its
// shardcron_jobs_count gauge (set once the scheduler has the set) says so.
func (b *bench) loaded(ctx context.Context, c *cluster) error {
	for _, p := range c.nodes {
		addr, ok := p.httpAddr()
		if !ok {
			return fmt.Errorf("%s: no http address logged yet", p.name)
		}
		n, err := scrape(ctx, "http://"+addr+"/metrics", "shardcron_jobs_count")
		if err != nil {
			return err
		}
		if int(n) != c.Jobs {
			return fmt.Errorf("%s runs %d of %d jobs", p.name, int(n), c.Jobs)
		}
	}
	return nil
}

// scrape reads one metric (summed over its series) from a Prometheus
// endpoint.
func scrape(ctx context.Context, url, name string) (float64, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, errors.New(url + ": " + resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		return 0, err
	}
	return m.sum(name), nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
