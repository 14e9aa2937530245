package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The plot is drawn by hand as SVG: two line charts, no dependency.

type series struct {
	name  string
	color string
	dash  bool
	ys    []float64 // NaN where there is no point
}

type panel struct {
	title, ylabel, xlabel string
	xs                    []string
	lines                 []series
	log                   bool // a log10 y axis (lags span milliseconds to tens of seconds)
}

// plot draws lag against fires/s for every system and runs/s against
// replicas for the scale-out.
func plot(res results) string {
	var lag panel
	lag.title, lag.ylabel, lag.xlabel = "Fire lag vs fires/s (3 replicas)", "lag ms (log scale)", "fires/s"
	lag.log = true
	byRate := roundsByRate(res.Rate)
	rs := slices.Sorted(maps.Keys(byRate))
	for _, r := range rs {
		lag.xs = append(lag.xs, fmt.Sprint(r))
	}
	colors := map[string]string{systemShardcron: "#1f77b4", systemLeader: "#d62728", systemFloor: "#555555"}
	for _, sys := range []string{systemShardcron, systemLeader, systemFloor} {
		// Rounds of a rate (-rounds) are drawn at their median.
		p50, p99 := nanSlice(len(rs)), nanSlice(len(rs))
		for i, rate := range rs {
			var a, b []float64
			for _, cells := range byRate[rate] {
				if r, ok := cells[sys]; ok {
					a, b = append(a, r.Lag.P50), append(b, r.Lag.P99)
				}
			}
			if len(a) > 0 {
				p50[i], p99[i] = median(a), median(b)
			}
		}
		if !allNaN(p99) {
			lag.lines = append(lag.lines, series{sys + " p99", colors[sys], false, p99}, series{sys + " p50", colors[sys], true, p50})
		}
	}
	var sc panel
	sc.title, sc.ylabel, sc.xlabel = "Runs/s vs replicas (runs hold a slot 100 ms)", "runs/s", "replicas"
	ns, shards := map[int]bool{}, map[int]bool{}
	for _, s := range res.Scale {
		ns[s.Replicas], shards[s.Shards] = true, true
	}
	nl := sortedInts(ns)
	for _, n := range nl {
		sc.xs = append(sc.xs, fmt.Sprint(n))
	}
	palette := []string{"#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"}
	for i, sh := range sortedInts(shards) {
		ys := nanSlice(len(nl))
		for _, s := range res.Scale {
			if s.Shards == sh {
				ys[indexOf(nl, s.Replicas)] = s.RunsPerSec
			}
		}
		sc.lines = append(sc.lines, series{fmt.Sprintf("%d shard(s)", sh), palette[i%len(palette)], false, ys})
	}
	panels := []panel{lag, sc}
	if len(res.Burst) > 0 {
		panels = append(panels, burstPanel(res.Burst, colors))
	}
	width := 480 * len(panels)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="400" font-family="sans-serif" font-size="12">`+"\n", width)
	fmt.Fprintf(&b, `<rect width="%d" height="400" fill="white"/>`+"\n", width)
	for i, p := range panels {
		drawPanel(&b, p, 60+480*float64(i), 40, 380, 280)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// burstPanel draws each system's lag p99 and time to deliver all, by burst
// mode.
func burstPanel(bursts []burstResult, colors map[string]string) panel {
	var p panel
	p.title, p.ylabel, p.xlabel = fmt.Sprintf("Burst of %d jobs at one minute", bursts[0].Jobs), "ms (log scale)", "schedule"
	p.log = true
	var modes []string
	for _, r := range bursts {
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
	}
	p.xs = modes
	for _, sys := range []string{systemShardcron, systemFloor} {
		p99, all := nanSlice(len(modes)), nanSlice(len(modes))
		for _, r := range bursts {
			if r.System == sys {
				i := slices.Index(modes, r.Mode)
				p99[i], all[i] = r.Lag.P99, r.DeliverAllMs
			}
		}
		if !allNaN(p99) {
			p.lines = append(p.lines, series{sys + " lag p99", colors[sys], false, p99}, series{sys + " deliver all", colors[sys], true, all})
		}
	}
	return p
}

func allNaN(ys []float64) bool {
	for _, y := range ys {
		if !math.IsNaN(y) {
			return false
		}
	}
	return true
}

func drawPanel(b *strings.Builder, p panel, x0, y0, w, h float64) {
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="14" font-weight="bold">%s</text>`+"\n", x0, y0-15, p.title)
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", x0, y0, w, h)
	top := 0.0
	for _, s := range p.lines {
		for _, y := range s.ys {
			if !math.IsNaN(y) {
				top = math.Max(top, y)
			}
		}
	}
	// yat maps a value to its height; ticks are the axis labels.
	var yat func(v float64) float64
	var ticks []float64
	if p.log {
		hi := math.Ceil(math.Log10(math.Max(top, 10)))
		yat = func(v float64) float64 { return y0 + h - h*math.Log10(math.Max(v, 1))/hi }
		for k := 0.0; k <= hi; k++ {
			ticks = append(ticks, math.Pow(10, k))
		}
	} else {
		top = niceCeil(top)
		yat = func(v float64) float64 { return y0 + h - h*v/top }
		for i := 0; i <= 4; i++ {
			ticks = append(ticks, top*float64(i)/4)
		}
	}
	for _, v := range ticks {
		y := yat(v)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`+"\n", x0, y, x0+w, y)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end">%g</text>`+"\n", x0-5, y+4, v)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" transform="rotate(-90 %.0f %.0f)" text-anchor="middle">%s</text>`+"\n",
		x0-45, y0+h/2, x0-45, y0+h/2, p.ylabel)
	xat := func(i int) float64 { return x0 + w*(float64(i)+0.5)/float64(max(len(p.xs), 1)) }
	for i, x := range p.xs {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", xat(i), y0+h+16, x)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x0+w/2, y0+h+34, p.xlabel)
	for li, s := range p.lines {
		var pts []string
		for i, y := range s.ys {
			if math.IsNaN(y) || top == 0 {
				continue
			}
			px, py := xat(i), yat(y)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px, py, s.color)
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		ly := y0 + 14 + 16*float64(li)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/>`+"\n", x0+10, ly-4, x0+30, ly-4, s.color, dash)
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", x0+35, ly, s.name)
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

func sortedInts(m map[int]bool) []int { return slices.Sorted(maps.Keys(m)) }

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
