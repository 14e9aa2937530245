package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// etcdSnap is what the benchmark reads from etcd's /metrics and /proc at
// one instant. See BENCHMARKS.md for what each counter means.
type etcdSnap struct {
	putBytes  float64 // etcd_debugging_mvcc_total_put_size_in_bytes: key+value bytes of every put
	puts      float64 // etcd_mvcc_put_total
	mvccTxns  float64 // etcd_mvcc_txn_total: applied write txns of more than one operation
	txnRPCs   float64 // grpc_server_handled_total{grpc_method="Txn"}: Txn requests answered
	walBytes  float64 // etcd_disk_wal_write_bytes_total
	nodeCPU   float64
	etcdCPU   float64
	takenTime time.Time
}

func (b *bench) snap(ctx context.Context, c *cluster) (etcdSnap, error) {
	s := etcdSnap{takenTime: time.Now()}
	s.nodeCPU, s.etcdCPU = b.cpu(c)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, b.etcdURL+"/metrics", nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	m, err := parseMetrics(resp.Body)
	if err != nil {
		return s, err
	}
	s.putBytes = m.sum("etcd_debugging_mvcc_total_put_size_in_bytes")
	s.puts = m.sum("etcd_mvcc_put_total")
	s.mvccTxns = m.sum("etcd_mvcc_txn_total")
	s.txnRPCs = m.sum("grpc_server_handled_total", `grpc_method="Txn"`)
	s.walBytes = m.sum("etcd_disk_wal_write_bytes_total")
	return s, nil
}

// rateResult is one steady-state window of one system.
type rateResult struct {
	System      string   `json:"system"`
	FiresPerSec int      `json:"fires_per_s"`
	Round       int      `json:"round"` // from 1 (-rounds)
	Replicas    int      `json:"replicas"`
	Lag         lagStats `json:"lag"`
	Expected    int      `json:"expected"`
	Fires       int      `json:"fires"`
	// Delivered is the fires received while CPU and etcd were measured
	// (between the two snapshots), whatever their tick: the per-fire
	// costs divide by it.
	Delivered    int     `json:"delivered"`
	Missed       int     `json:"missed"`
	Duplicates   int     `json:"duplicates"`
	Stale        int     `json:"stale_rejected"`
	PutBytes     float64 `json:"etcd_put_bytes_per_fire"`
	TxnRPCs      float64 `json:"etcd_txns_per_fire"`
	MvccTxns     float64 `json:"etcd_mvcc_txns_per_fire"`
	Puts         float64 `json:"etcd_puts_per_fire"`
	WALBytes     float64 `json:"etcd_wal_bytes_per_fire"`
	CPUNodes1k   float64 `json:"cpu_s_per_1k_fires_replicas"`
	CPUEtcd1k    float64 `json:"cpu_s_per_1k_fires_etcd"`
	WindowSecond int     `json:"window_s"`
	// BusiestShare is the busiest node's part of the window's ticks against
	// an even split (busiestShare): 1 is even.
	BusiestShare float64 `json:"busiest_share"`
	// MissedAt: missed ticks by second from the window's start.
	MissedAt map[int64]int `json:"missed_at_s,omitempty"`
	// WorstSeconds: the five seconds of the window with the highest lag.
	WorstSeconds []worstSecond `json:"worst_seconds,omitempty"`
	// SecondMaxMS: every second's worst lag, in the window's order: a
	// steady excess over a peer looks flat here, a slow spell does not.
	SecondMaxMS []float64 `json:"second_max_ms,omitempty"`
	// LagByNode: the lag of each node's share of the window's ticks.
	LagByNode map[string]lagStats `json:"lag_by_node,omitempty"`
	// Phases: CPU by step of the second (-phases), nil unless asked for.
	Phases *phases `json:"phases,omitempty"`
}

type worstSecond struct {
	Offset int64   `json:"offset_s"`
	MaxMS  float64 `json:"max_ms"`
}

// worstSeconds returns the n seconds of byOffset with the highest lag.
func worstSeconds(byOffset map[int64]time.Duration, n int) []worstSecond {
	var out []worstSecond
	for off, d := range byOffset {
		out = append(out, worstSecond{off, ms(d)})
	}
	slices.SortFunc(out, func(a, b worstSecond) int { return cmp.Compare(b.MaxMS, a.MaxMS) })
	return out[:min(n, len(out))]
}

// secondSeries returns the worst lag of each of the window's n seconds, in
// milliseconds, in order (0 for a second with no receipt).
func secondSeries(byOffset map[int64]time.Duration, n int) []float64 {
	out := make([]float64, n)
	for off, d := range byOffset {
		if off >= 0 && off < int64(n) {
			out[off] = ms(d)
		}
	}
	return out
}

// waitUntil sleeps until t: the benchmark's windows are wall-clock
// intervals, so this is the measurement's own timing.
func waitUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}

// measureRate runs c for warmup, then measures a window of whole seconds,
// then waits (bounded) for the window's late ticks to arrive.
func (b *bench) measureRate(ctx context.Context, c *cluster, led *ledger) (rateResult, error) {
	from := time.Now().Add(b.cfg.warmup).Truncate(time.Second).Add(time.Second)
	to := from.Add(b.cfg.window)
	// Snapshots are taken mid-second, between bursts, so that reading
	// /metrics and /proc does not take CPU from the ticks it measures; the
	// span between them still holds one burst per second of the window.
	if err := waitUntil(ctx, from.Add(-time.Second/2)); err != nil {
		return rateResult{}, err
	}
	s0, err := b.snap(ctx, c)
	if err != nil {
		return rateResult{}, err
	}
	ph := b.startPhases(ctx, c, from)
	if err := waitUntil(ctx, to.Add(-time.Second/2)); err != nil {
		return rateResult{}, err
	}
	s1, err := b.snap(ctx, c)
	if err != nil {
		return rateResult{}, err
	}
	_ = pollUntil(ctx, 100*time.Millisecond, b.cfg.drain, func() error {
		if n := led.missing(c.jobs, from, to); n > 0 {
			return fmt.Errorf("%d ticks not received", n)
		}
		return nil
	})
	w := led.window(c.jobs, from, to, time.Now())
	r := rateResult{
		System: c.System, FiresPerSec: c.Jobs, Replicas: c.Replicas, Lag: summarise(w.Lags),
		Expected: w.Expected, Fires: w.Received, Missed: w.Missed, Duplicates: w.Duplicates, Stale: w.Stale,
		WindowSecond: int(b.cfg.window.Seconds()), MissedAt: w.MissedAt, WorstSeconds: worstSeconds(w.SecondMax, 5),
		SecondMaxMS: secondSeries(w.SecondMax, int(b.cfg.window.Seconds())),
	}
	if ph != nil {
		p := <-ph
		r.Phases = &p
	}
	arrived := led.arrivals(from, to)
	r.BusiestShare = busiestShare(arrived, c.Replicas)
	r.LagByNode = lagByNode(arrived)
	r.Delivered = led.receivedBetween(s0.takenTime, s1.takenTime)
	if n := float64(r.Delivered); n > 0 {
		r.PutBytes = (s1.putBytes - s0.putBytes) / n
		r.TxnRPCs = (s1.txnRPCs - s0.txnRPCs) / n
		r.MvccTxns = (s1.mvccTxns - s0.mvccTxns) / n
		r.Puts = (s1.puts - s0.puts) / n
		r.WALBytes = (s1.walBytes - s0.walBytes) / n
		r.CPUNodes1k = (s1.nodeCPU - s0.nodeCPU) / n * 1000
		r.CPUEtcd1k = (s1.etcdCPU - s0.etcdCPU) / n * 1000
	}
	return r, nil
}

// runRate is one system at one rate: start, measure, stop.
func (b *bench) runRate(ctx context.Context, system string, rate int) (rateResult, error) {
	led := newLedger()
	b.sink.setLedger(led)
	s := spec{System: system, Name: fmt.Sprintf("r%d-%s", rate, system), Replicas: b.cfg.replicas, Jobs: rate,
		Shards: b.cfg.shards, MaxRuns: b.cfg.maxRuns, Path: "/fire", TTL: b.cfg.ttl}
	c, err := b.startCluster(ctx, s, led)
	if c != nil {
		defer b.stop(ctx, c)
	}
	if err != nil {
		return rateResult{}, fmt.Errorf("%s: start: %w", s.Name, err)
	}
	r, err := b.measureRate(ctx, c, led)
	if err != nil {
		return r, fmt.Errorf("%s: %w", s.Name, err)
	}
	return r, nil
}
