package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// ratio is shardcron's figure over a peer's (the leader or the floor) at
// one rate.
type ratio struct {
	FiresPerSec int     `json:"fires_per_s"`
	Round       int     `json:"round"`
	What        string  `json:"what"`
	Versus      string  `json:"versus"` // leader or floor
	Shardcron   float64 `json:"shardcron"`
	Peer        float64 `json:"peer"`
	Ratio       float64 `json:"ratio"`
}

// floorRates are the rates at which issue 23 sets shardcron's lag p99
// against the floor system's.
var floorRates = map[int]bool{1000: true, 5000: true, 10000: true}

// floorFactor is how far above the floor system's lag p99 shardcron's may
// be (issue 23), at those rates and in a burst.
const floorFactor = 1.5

// target is one of issues 11's and 23's targets, judged on this run.
type target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Limit string  `json:"limit"`
	Pass  bool    `json:"pass"`
	Note  string  `json:"note,omitempty"`
}

// evaluate computes the side-by-side ratios and judges the targets. A rate
// measured in several rounds (-rounds) is judged on the median of its
// rounds' ratios, each round's shardcron against the peer measured beside
// it, and fails if shardcron missed or repeated a tick in any round.
func evaluate(res results) ([]ratio, []target) {
	var ratios []ratio
	var targets []target
	byRate := roundsByRate(res.Rate)
	for _, rate := range slices.Sorted(maps.Keys(byRate)) {
		for _, peer := range []string{systemLeader, systemFloor} {
			pairs := pairsWith(byRate[rate], peer)
			for _, p := range pairs {
				ratios = append(ratios, rateRatios(rate, peer, p.sc, p.peer)...)
			}
			switch {
			case len(pairs) == 0:
			case peer == systemLeader:
				targets = append(targets, lagTarget(rate, peer, 0.5, pairs))
			case floorRates[rate]:
				targets = append(targets, lagTarget(rate, peer, floorFactor, pairs))
			}
		}
		if rate != 1000 {
			continue
		}
		var put, txn []float64
		for _, c := range byRate[rate] {
			if sc, ok := c[systemShardcron]; ok {
				put, txn = append(put, sc.PutBytes), append(txn, sc.TxnRPCs)
			}
		}
		if len(put) > 0 {
			put, txn := median(put), median(txn)
			targets = append(targets,
				target{Name: "etcd bytes put per fire at 1,000 fires/s", Value: put, Limit: "≤ 400", Pass: put <= 400},
				target{Name: "etcd transactions per fire at 1,000 fires/s", Value: txn, Limit: "≤ 0.05", Pass: txn <= 0.05})
		}
	}
	var one, many float64
	for _, s := range res.Scale {
		if s.Shards == 1 && s.Replicas == 4 {
			one = s.RunsPerSec
		}
		if s.Shards == 256 && s.Replicas == 4 {
			many = s.RunsPerSec
		}
	}
	if one > 0 && many > 0 {
		targets = append(targets, target{Name: "runs/s, 256 shards over 4 replicas vs 1 shard", Value: many / one, Limit: "≥ 3.5", Pass: many/one >= 3.5})
	}
	return ratios, append(targets, burstTargets(res.Burst)...)
}

// roundCells is one round's results at one rate, by system.
type roundCells map[string]rateResult

// roundsByRate groups results by rate, and a rate's by round in the order
// they were measured.
func roundsByRate(rs []rateResult) map[int][]roundCells {
	out := map[int][]roundCells{}
	seen := map[[2]int]roundCells{}
	for _, r := range rs {
		k := [2]int{r.FiresPerSec, r.Round}
		c, ok := seen[k]
		if !ok {
			c = roundCells{}
			seen[k] = c
			out[r.FiresPerSec] = append(out[r.FiresPerSec], c)
		}
		c[r.System] = r
	}
	return out
}

// pair is shardcron and a peer measured in one round.
type pair struct{ sc, peer rateResult }

// pairsWith pairs shardcron with peer in each round that measured both.
func pairsWith(rounds []roundCells, peer string) []pair {
	var out []pair
	for _, c := range rounds {
		sc, okS := c[systemShardcron]
		p, okP := c[peer]
		if okS && okP {
			out = append(out, pair{sc, p})
		}
	}
	return out
}

// lagTarget judges shardcron's lag p99 at one rate against limit × the
// peer's: the median of the rounds' ratios, and no tick missed or repeated
// in any round.
func lagTarget(rate int, peer string, limit float64, pairs []pair) target {
	var ratios []float64
	var lags []string
	missed, dups, peerMissed := 0, 0, 0
	for _, p := range pairs {
		ratios = append(ratios, div(p.sc.Lag.P99, p.peer.Lag.P99))
		lags = append(lags, fmt.Sprintf("%.1f vs %.1f", p.sc.Lag.P99, p.peer.Lag.P99))
		missed, dups, peerMissed = missed+p.sc.Missed, dups+p.sc.Duplicates, peerMissed+p.peer.Missed
	}
	m := median(ratios)
	note := fmt.Sprintf("%s ms", strings.Join(lags, ", "))
	if len(pairs) > 1 {
		note = fmt.Sprintf("median of %d rounds (%s): %s", len(pairs), fmtRatios(ratios), note)
	}
	return target{Name: fmt.Sprintf("lag p99 at %d fires/s ≤ %.1f× %s, 0 missed, 0 duplicates", rate, limit, peer),
		Value: m, Limit: fmt.Sprintf("≤ %.1f", limit), Pass: m <= limit && missed == 0 && dups == 0,
		Note: fmt.Sprintf("%s; missed %d, duplicates %d (%s missed %d)", note, missed, dups, peer, peerMissed)}
}

func fmtRatios(rs []float64) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(out, ", ")
}

// median is the middle value of xs (the mean of the two middle ones for an
// even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// rateRatios sets shardcron's lag and CPU at one rate against peer's.
func rateRatios(rate int, peer string, sc, p rateResult) []ratio {
	var out []ratio
	for _, x := range []struct {
		what string
		s, p float64
	}{{"lag p50", sc.Lag.P50, p.Lag.P50}, {"lag p99", sc.Lag.P99, p.Lag.P99}, {"lag max", sc.Lag.Max, p.Lag.Max},
		{"cpu replicas /1k fires", sc.CPUNodes1k, p.CPUNodes1k}, {"cpu etcd /1k fires", sc.CPUEtcd1k, p.CPUEtcd1k}} {
		out = append(out, ratio{rate, sc.Round, x.what, peer, x.s, x.p, div(x.s, x.p)})
	}
	return out
}

// burstTargets judges each burst mode measured for both shardcron and the
// floor: every tick delivered once, and lag p99 within floorFactor of the
// floor's for the same burst.
func burstTargets(bursts []burstResult) []target {
	var out []target
	for _, sc := range bursts {
		if sc.System != systemShardcron {
			continue
		}
		for _, fl := range bursts {
			if fl.System != systemFloor || fl.Mode != sc.Mode || fl.Jobs != sc.Jobs {
				continue
			}
			out = append(out, target{Name: fmt.Sprintf("burst of %d jobs (%s): all delivered, 0 missed, 0 duplicates, lag p99 ≤ %.1f× floor", sc.Jobs, sc.Mode, floorFactor),
				Value: div(sc.Lag.P99, fl.Lag.P99), Limit: fmt.Sprintf("≤ %.1f", floorFactor),
				Pass: sc.Lag.P99 <= floorFactor*fl.Lag.P99 && sc.Missed == 0 && sc.Duplicates == 0 && sc.Received == sc.Jobs,
				Note: fmt.Sprintf("%.0f vs %.0f ms; all delivered in %.0f vs %.0f ms; missed %d, duplicates %d (floor missed %d)",
					sc.Lag.P99, fl.Lag.P99, sc.DeliverAllMs, fl.DeliverAllMs, sc.Missed, sc.Duplicates, fl.Missed)})
		}
	}
	return out
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// printBurst prints the burst scenario's table.
func printBurst(w io.Writer, tw *tabwriter.Writer, bursts []burstResult) {
	fmt.Fprintln(w, "\n## Burst: every job due once at one minute (plain) or at its H second of it")
	fmt.Fprintln(tw, "jobs\tmode\tsystem\treplicas\tticks span s\tdeliver all ms\tlag p50 ms\tp99 ms\tmax ms\treceived\tmissed\tdup\tready s\tmargin s\t")
	for _, r := range bursts {
		ge := ""
		if r.Missed > 0 {
			ge = "≥"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%.0f\t%s%.0f\t%.0f\t%s%.0f\t%s%.0f\t%d\t%d\t%d\t%.1f\t%.1f\t\n", r.Jobs, r.Mode, r.System, r.Replicas,
			r.SpanS, ge, r.DeliverAllMs, r.Lag.P50, ge, r.Lag.P99, ge, r.Lag.Max, r.Received, r.Missed, r.Duplicates, r.ReadyS, r.MarginS)
	}
	tw.Flush()
}

// report prints the tables and the JSON summary, and writes the JSON file
// and the plot.
func report(w io.Writer, res results, cfg config) {
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	if len(res.Rate) > 0 {
		fmt.Fprintln(w, "\n## Fire lag and cost, jobs every second (lag = receipt at the sink − tick)")
		fmt.Fprintln(w, "(a tick not received by the end of the window + drain counts in the lag at its lower bound, marked ≥)")
		fmt.Fprintln(tw, "fires/s\tround\tsystem\treplicas\tlag p50 ms\tp99 ms\tmax ms\tfires\tmissed\tdup\tstale\tbusiest\tetcd B put/fire\tetcd txn/fire\tWAL B/fire\tCPU s/1k fires replicas\tetcd\t")
		for _, r := range res.Rate {
			ge := ""
			if r.Missed > 0 {
				ge = "≥"
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%.0f\t%s%.0f\t%s%.0f\t%d\t%d\t%d\t%d\t%.2f\t%.0f\t%.3f\t%.0f\t%.3f\t%.3f\t\n",
				r.FiresPerSec, r.Round, r.System, r.Replicas, r.Lag.P50, ge, r.Lag.P99, ge, r.Lag.Max, r.Fires, r.Missed, r.Duplicates, r.Stale,
				r.BusiestShare, r.PutBytes, r.TxnRPCs, r.WALBytes, r.CPUNodes1k, r.CPUEtcd1k)
		}
		tw.Flush()
		for _, r := range res.Rate {
			if r.Phases != nil {
				printPhases(w, tw, r)
			}
		}
	}
	if len(res.Ratios) > 0 {
		fmt.Fprintln(w, "\n## shardcron / leader, shardcron / floor")
		fmt.Fprintln(tw, "fires/s\tround\tversus\tmeasure\tshardcron\tpeer\tratio\t")
		for _, r := range res.Ratios {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%.3f\t%.3f\t%.2f\t\n", r.FiresPerSec, r.Round, r.Versus, r.What, r.Shardcron, r.Peer, r.Ratio)
		}
		tw.Flush()
	}
	if len(res.Burst) > 0 {
		printBurst(w, tw, res.Burst)
	}
	if len(res.Shapes) > 0 {
		printShapes(w, tw, res.Shapes)
	}
	if len(res.Scale) > 0 {
		fmt.Fprintln(w, "\n## Scale-out, I/O-bound runs (each holds a slot 100 ms)")
		fmt.Fprintln(tw, "shards\treplicas\toffered/s\tslots each\truns/s\tceiling runs/s\t")
		for _, s := range res.Scale {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t%.0f\t\n", s.Shards, s.Replicas, s.Offered, s.SlotsEach, s.RunsPerSec, s.Ceiling)
		}
		tw.Flush()
	}
	if len(res.Faults) > 0 {
		fmt.Fprintln(w, "\n## Faults, landed half a second after a tick")
		fmt.Fprintln(tw, "system\tfault\tgap ms\thandoff p50 ms\thandoff max ms\tlag p99 ms\tmax ms\tticks\tmissed\tdup\tstale\t")
		for _, f := range res.Faults {
			ge := ""
			if f.Missed > 0 {
				ge = "≥"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%s%.0f\t%s%.0f\t%d\t%d\t%d\t%d\t\n", f.System, f.Kind, f.GapMs,
				f.HandoffP50Ms, f.HandoffMaxMs, ge, f.Lag.P99, ge, f.Lag.Max, f.Expected, f.Missed, f.Duplicates, f.Stale)
		}
		tw.Flush()
	}
	if len(res.Targets) > 0 {
		fmt.Fprintln(w, "\n## Targets (benchmark figures, not tests)")
		for _, t := range res.Targets {
			verdict := "FAIL"
			if t.Pass {
				verdict = "PASS"
			}
			fmt.Fprintf(w, "%s  %s: %.3f (%s) %s\n", verdict, t.Name, t.Value, t.Limit, t.Note)
		}
	}
	fmt.Fprintf(w, "\nduration %s; load average (1, 5, 15 min) at the start %s, at the end %s\n", res.Duration, res.LoadStart, res.LoadEnd)
	b, _ := json.MarshalIndent(res, "", "  ") // plain structs of numbers and strings
	fmt.Fprintf(w, "\n%s\n", b)
	if cfg.jsonOut != "" {
		if err := os.WriteFile(cfg.jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		}
	}
	if cfg.svgOut != "" {
		if err := os.WriteFile(cfg.svgOut, []byte(plot(res)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		}
	}
}
