package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Phases say where a second's CPU goes inside the second: every process's
// CPU, and the host's idle time, read from /proc every phaseSample and
// folded into phaseStep steps of the wall-clock second. Every system's
// ticks fall on the second, so a burst's length is read off the steps its
// processes keep busy, and what else runs inside it (etcd, the sink) shows
// beside it. /proc counts in clock ticks (10 ms); a fold over many seconds
// averages that out.

const (
	phaseStep   = 50 * time.Millisecond
	phaseSample = 4 * time.Millisecond
	phaseSteps  = int(time.Second / phaseStep)
)

// phases is one window's fold: for each row, milliseconds of CPU in each
// step of the second, averaged over the seconds sampled (two cores make
// 2 × phaseStep a step).
type phases struct {
	StepMS  int        `json:"step_ms"`
	Seconds float64    `json:"seconds"`
	Rows    []phaseRow `json:"rows"`
}

type phaseRow struct {
	Name string    `json:"name"`
	MS   []float64 `json:"ms"`
}

// phaseSource is one row's reading: cumulative CPU seconds so far.
type phaseSource struct {
	name string
	read func() (float64, error)
}

// pidsCPU reads the summed CPU of pids.
func pidsCPU(pids ...int) func() (float64, error) {
	return func() (float64, error) {
		var t float64
		for _, p := range pids {
			v, err := readCPU(p)
			if err != nil {
				return 0, err
			}
			t += v
		}
		return t, nil
	}
}

// hostIdle reads the host's idle CPU seconds (idle and iowait, all cores)
// from /proc/stat.
func hostIdle() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, fmt.Errorf("phases: malformed /proc/stat line %q", line)
	}
	var t uint64
	for _, s := range f[4:6] { // idle, iowait
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("phases: /proc/stat: %w", err)
		}
		t += v
	}
	return float64(t) / clockTicks, nil
}

// phaseReading is every source's reading at one instant.
type phaseReading struct {
	at   time.Time
	vals []float64
}

// samplePhases reads sources every phaseSample for d and folds the
// readings; a source that fails to read ends the sampling early.
func samplePhases(ctx context.Context, sources []phaseSource, d time.Duration) phases {
	var readings []phaseReading
	t := time.NewTicker(phaseSample)
	defer t.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		r := phaseReading{at: time.Now(), vals: make([]float64, len(sources))}
		for i, s := range sources {
			v, err := s.read()
			if err != nil {
				return foldPhases(sources, readings)
			}
			r.vals[i] = v
		}
		readings = append(readings, r)
		select {
		case <-ctx.Done():
			return foldPhases(sources, readings)
		case <-t.C:
		}
	}
	return foldPhases(sources, readings)
}

// foldPhases gives each reading's increase over the one before to the step
// of the second its interval's midpoint falls in, and averages the steps
// over the seconds the readings span.
func foldPhases(sources []phaseSource, readings []phaseReading) phases {
	p := phases{StepMS: int(phaseStep / time.Millisecond)}
	for _, s := range sources {
		p.Rows = append(p.Rows, phaseRow{Name: s.name, MS: make([]float64, phaseSteps)})
	}
	if len(readings) < 2 {
		return p
	}
	span := readings[len(readings)-1].at.Sub(readings[0].at)
	p.Seconds = span.Seconds()
	for i := 1; i < len(readings); i++ {
		a, b := readings[i-1], readings[i]
		mid := a.at.Add(b.at.Sub(a.at) / 2)
		step := int(time.Duration(mid.Nanosecond()) / phaseStep)
		for j := range sources {
			p.Rows[j].MS[step] += (b.vals[j] - a.vals[j]) * 1000 / p.Seconds
		}
	}
	return p
}

// startPhases samples the phases of c's processes, etcd, the sink (this
// process) and the host's idle time from the window's start, for
// -phases at most, inside the window; nil when not asked for.
func (b *bench) startPhases(ctx context.Context, c *cluster, from time.Time) <-chan phases {
	d := min(b.cfg.phases, b.cfg.window-time.Second)
	if d <= 0 {
		return nil
	}
	pids := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		pids[i] = n.pid()
	}
	sources := []phaseSource{
		{c.System, pidsCPU(pids...)},
		{"etcd", pidsCPU(b.etcdProc.pid())},
		{"sink", pidsCPU(os.Getpid())},
		{"idle", hostIdle},
	}
	out := make(chan phases, 1)
	go func() {
		if waitUntil(ctx, from) != nil {
			out <- foldPhases(sources, nil)
			return
		}
		out <- samplePhases(ctx, sources, d)
	}()
	return out
}

// printPhases prints one window's phases, a row a source, a column a step.
func printPhases(w io.Writer, tw *tabwriter.Writer, r rateResult) {
	p := r.Phases
	fmt.Fprintf(w, "\n## %s at %d fires/s: ms of CPU in each %d ms step of the second (%.0f s sampled; two cores make %d a step)\n",
		r.System, r.FiresPerSec, p.StepMS, p.Seconds, 2*p.StepMS)
	fmt.Fprint(tw, "\t")
	for i := range phaseSteps {
		fmt.Fprintf(tw, "%d\t", i*p.StepMS)
	}
	fmt.Fprintln(tw, "second\t")
	for _, row := range p.Rows {
		fmt.Fprintf(tw, "%s\t", row.Name)
		var sum float64
		for _, v := range row.MS {
			fmt.Fprintf(tw, "%.0f\t", v)
			sum += v
		}
		fmt.Fprintf(tw, "%.0f\t\n", sum)
	}
	tw.Flush()
}
