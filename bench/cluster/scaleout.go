package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// results is everything one run measured: what the JSON summary holds.
type results struct {
	Duration string `json:"duration"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute load
	// averages: the machine is shared, and the figures move with its load.
	LoadStart string        `json:"load_start"`
	LoadEnd   string        `json:"load_end"`
	Rate      []rateResult  `json:"rate"`
	Scale     []scaleResult `json:"scaleout"`
	Faults    []faultResult `json:"faults"`
	Burst     []burstResult `json:"burst"`
	Shapes    []shapeResult `json:"txn_shapes,omitempty"`
	Ratios    []ratio       `json:"ratios"`
	Targets   []target      `json:"targets"`
}

// runAll runs the chosen scenarios in order. A scenario that fails is
// reported and the next one still runs; the first error is returned.
func (b *bench) runAll(ctx context.Context) (results, error) {
	var res results
	var first error
	note := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-cluster:", err)
			if first == nil {
				first = err
			}
		}
	}
	for _, phase := range []func(context.Context, *results, func(error)) error{
		b.rateCells, b.scaleCells, b.faultCells, b.burstCells, b.shapeCells,
	} {
		if err := phase(ctx, &res, note); err != nil {
			return res, err // interrupted
		}
	}
	res.Ratios, res.Targets = evaluate(res)
	return res, first
}

// Each phase runs one scenario's cells when it was chosen, noting a
// cell's failure and going on; it returns only ctx's error, interrupted.

func (b *bench) rateCells(ctx context.Context, res *results, note func(error)) error {
	if !b.cfg.scenarios["rate"] {
		return nil
	}
	// A round measures every system at one rate one after another, so its
	// ratios compare neighbours in time; a slow spell that lands on one
	// cell moves one round's ratio, and the median of the rounds outvotes
	// it (evaluate).
	for _, rate := range b.cfg.rates {
		for round := 1; round <= b.cfg.rounds; round++ {
			for _, sys := range b.cfg.systems {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				progress("rate %d fires/s, round %d of %d: %s", rate, round, b.cfg.rounds, sys)
				r, err := b.runRate(ctx, sys, rate)
				note(err)
				if err == nil {
					r.Round = round
					res.Rate = append(res.Rate, r)
				}
			}
		}
	}
	return nil
}

func (b *bench) scaleCells(ctx context.Context, res *results, note func(error)) error {
	if !b.cfg.scenarios["scaleout"] {
		return nil
	}
	for _, shards := range b.cfg.scaleShards {
		for _, n := range b.cfg.scaleReplicas {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			progress("scale-out: %d shards, %d replicas", shards, n)
			r, err := b.runScale(ctx, shards, n)
			note(err)
			if err == nil {
				res.Scale = append(res.Scale, r)
			}
		}
	}
	return nil
}

func (b *bench) faultCells(ctx context.Context, res *results, note func(error)) error {
	if !b.cfg.scenarios["faults"] {
		return nil
	}
	for _, sys := range b.cfg.systems {
		if sys == systemFloor {
			continue // the floor has no owner to crash
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		progress("faults: %s", sys)
		r, err := b.runFaults(ctx, sys)
		note(err)
		res.Faults = append(res.Faults, r...)
	}
	return nil
}

func (b *bench) burstCells(ctx context.Context, res *results, note func(error)) error {
	if !b.cfg.scenarios["burst"] {
		return nil
	}
	for _, mode := range b.cfg.burstModes {
		for _, sys := range b.cfg.systems {
			if sys != systemShardcron && sys != systemFloor {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			progress("burst of %d jobs, %s: %s", b.cfg.burstJobs, mode, sys)
			r, err := b.runBurst(ctx, sys, mode)
			note(err)
			if err == nil {
				res.Burst = append(res.Burst, r)
			}
		}
	}
	return nil
}

// shapeCells runs the transaction shapes unless interrupted before them,
// which skips them without an error: the results so far are evaluated.
func (b *bench) shapeCells(ctx context.Context, res *results, note func(error)) error {
	if !b.cfg.scenarios["txnshape"] || ctx.Err() != nil {
		return nil
	}
	progress("transaction shapes")
	r, err := b.runTxnShapes(ctx)
	note(err)
	res.Shapes = r
	return nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// scaleResult is one cell of the scale-out: runs completed per second when
// each run holds a slot 100 ms and slots are capped per replica.
type scaleResult struct {
	Shards     int     `json:"shards"`
	Replicas   int     `json:"replicas"`
	Offered    int     `json:"offered_per_s"`
	SlotsEach  int     `json:"slots_per_replica"`
	RunsPerSec float64 `json:"runs_per_s"`
	Ceiling    float64 `json:"ceiling_runs_per_s"` // replicas × slots / 100 ms
}

func (b *bench) runScale(ctx context.Context, shards, n int) (scaleResult, error) {
	led := newLedger()
	b.sink.setLedger(led)
	s := spec{System: systemShardcron, Name: fmt.Sprintf("s%d-n%d", shards, n), Replicas: n, Jobs: b.cfg.scaleJobs,
		Shards: shards, MaxRuns: b.cfg.scaleSlots, Path: "/slow", TTL: b.cfg.ttl}
	c, err := b.startCluster(ctx, s, led)
	if c != nil {
		defer b.stop(ctx, c)
	}
	if err != nil {
		return scaleResult{}, fmt.Errorf("%s: start: %w", s.Name, err)
	}
	from := time.Now().Add(b.cfg.warmup).Truncate(time.Second).Add(time.Second)
	to := from.Add(b.cfg.scaleWindow)
	if err := waitUntil(ctx, to); err != nil {
		return scaleResult{}, err
	}
	done := led.completions(from, to)
	hold := b.sink.hold.Seconds()
	return scaleResult{
		Shards: shards, Replicas: n, Offered: b.cfg.scaleJobs, SlotsEach: b.cfg.scaleSlots,
		RunsPerSec: float64(done) / to.Sub(from).Seconds(),
		Ceiling:    float64(n*b.cfg.scaleSlots) / hold,
	}, nil
}
